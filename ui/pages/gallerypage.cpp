#include "ui/pages/gallerypage.h"

#include "core/gallery/gallery.h"
#include "core/runtime/conditioning.h"
#include "inference/util/format.h"
#include "ui/models/gallerymodel.h"
#include "ui/pages/pagehelpers.h"
#include "ui/widgets/videoview.h"

#include <QAudioDevice>
#include <QAudioOutput>
#include <QClipboard>
#include <QComboBox>
#include <QCoreApplication>
#include <QDateTime>
#include <QDir>
#include <QFormLayout>
#include <QDoubleSpinBox>
#include <QDialogButtonBox>
#include <QDialog>
#include <QDBusConnection>
#include <QDBusMessage>
#include <QDesktopServices>
#include <QFileDialog>
#include <QFileInfo>
#include <QGridLayout>
#include <QGuiApplication>
#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QLineEdit>
#include <QListView>
#include <QLocale>
#include <QMediaDevices>
#include <QMediaPlayer>
#include <QMenu>
#include <QMessageBox>
#include <QPointer>
#include <QPushButton>
#include <QShortcut>
#include <QSlider>
#include <QSplitter>
#include <QStackedWidget>
#include <QStandardPaths>
#include <QTextBrowser>
#include <QThreadPool>
#include <QTimer>
#include <QUrl>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <memory>

namespace vireo::ui {

namespace {

QString esc(const std::string& s)
{
    return QString::fromStdString(s).toHtmlEscaped();
}

QString timeText(qint64 ms)
{
    return QStringLiteral("%1:%2.%3")
        .arg(ms / 60000)
        .arg((ms / 1000) % 60, 2, 10, QLatin1Char('0'))
        .arg((ms % 1000) / 10, 2, 10, QLatin1Char('0'));
}

// The recipe as a person reads it: what was asked, with which model, how, and what it cost.
QString recipeHtml(const output::Recipe& r, const gallery::GalleryItem& item)
{
    const auto& q = r.request;
    QString h;
    auto row = [&h](const QString& k, const QString& v) {
        if (!v.isEmpty())
            h += QStringLiteral("<tr><td style='color:#8a93a3;padding-right:12px'>%1</td><td>%2</td></tr>").arg(k, v);
    };
    h += QStringLiteral("<h3 style='margin:0'>Prompt</h3><p>%1</p>").arg(esc(q.prompt).replace(QLatin1Char('\n'), QStringLiteral("<br>")));
    if (!r.enhancedPrompt.empty())
        h += QStringLiteral("<h4 style='margin:0'>As the prompt enhancer wrote it (what the video follows)</h4><p>%1</p>")
                 .arg(esc(r.enhancedPrompt).replace(QLatin1Char('\n'), QStringLiteral("<br>")));
    if (!q.negativePrompt.empty())
        h += QStringLiteral("<h4 style='margin:0'>Negative prompt</h4><p>%1</p>").arg(esc(q.negativePrompt));
    h += QStringLiteral("<table cellspacing=2>");
    row(QStringLiteral("Model"), esc(r.modelTitle.empty() ? r.pipeline : r.modelTitle));
    if (!r.family.empty())
        row(QStringLiteral("Catalog"), esc(r.family + " / " + r.variant));
    row(QStringLiteral("Version"), esc(r.modelVersion.empty() ? std::string() : "LTX-" + r.modelVersion));
    if (!r.repo.empty())
        row(QStringLiteral("Hub"), esc(r.repo + (r.commit.empty() ? std::string() : " @ " + r.commit)));
    row(QStringLiteral("Size"),
        QStringLiteral("%1 × %2, %3 frames at %4 fps (%5 s)")
            .arg(q.width)
            .arg(q.height)
            .arg(q.frames)
            .arg(q.fps)
            .arg(q.fps > 0 ? QString::number(static_cast<double>(q.frames) / q.fps, 'f', 2) : QStringLiteral("?")));
    if (r.audioSampleRate > 0)
        row(QStringLiteral("Sound"), QStringLiteral("%1 Hz, %2 channels").arg(r.audioSampleRate).arg(r.audioChannels));
    row(QStringLiteral("Seed"), QString::number(q.seed));
    row(QStringLiteral("Schedule"), QStringLiteral("%1, %2 steps").arg(esc(q.schedule)).arg(q.steps));
    row(QStringLiteral("Guidance"),
        QStringLiteral("video %1, audio %2, rescale %3").arg(q.guidance).arg(q.audioGuidance).arg(q.guidanceRescale));
    if (!r.stages.empty()) {
        const QString path =
            r.stages == "two" ? QStringLiteral("two stages (half size, latent upsample ×2, refine)") : QStringLiteral("one stage");
        row(QStringLiteral("Path"), r.stagesReason.empty() ? path : path + QStringLiteral("<br>") + esc(r.stagesReason));
    }
    if (!r.conditions.empty()) {
        QStringList c;
        for (const auto& cond : r.conditions)
            c << QStringLiteral("%1 at frame %2, strength %3%4<br><span style='color:#8a93a3'>sha256 %5…%6</span>")
                     .arg(esc(QFileInfo(QString::fromStdString(cond.source)).fileName().toStdString()))
                     .arg(cond.frame)
                     .arg(cond.strength)
                     .arg(cond.frames > 1
                             ? (cond.fromEnd ? QStringLiteral(", its last %1 frames") : QStringLiteral(", its first %1 frames"))
                                   .arg(cond.frames)
                             : QStringLiteral(", CRF %1").arg(cond.crf))
                     .arg(esc(cond.sha256.substr(0, 16)))
                     .arg(cond.copy.empty() ? QStringLiteral(" · no copy kept") : QStringLiteral(" · kept as ") + esc(cond.copy));
        const bool clip = r.conditions.size() == 1 && r.conditions.front().frames > 1;
        row(r.conditions.size() == 1 ? (clip ? QStringLiteral("Start clip") : QStringLiteral("Start image")) : QStringLiteral("Conditions"),
            c.join(QStringLiteral("<br>")));
    }
    row(QStringLiteral("Speed"),
        r.stepsSkipped > 0 ? QStringLiteral("%1, %2 of %3 steps reused").arg(esc(q.speed)).arg(r.stepsSkipped).arg(q.steps) : esc(q.speed));
    if (!q.knobs.empty()) {
        QStringList k;
        for (const auto& [id, value] : q.knobs)
            k << esc(id) + QStringLiteral(" ") + QString::number(value);
        row(QStringLiteral("Controls"), k.join(QStringLiteral(", ")));
    }
    row(QStringLiteral("Ran on"),
        esc(r.device + (r.dtype.empty() ? std::string() : ", " + r.dtype) + (r.placement.empty() ? std::string() : ", " + r.placement)));
    if (!r.paths.empty())
        row(QStringLiteral("Compute"), esc(r.paths));
    if (!r.plannedPaths.empty())
        row(QStringLiteral("Planned"), esc(r.plannedPaths));
    for (const auto& w : r.pathWarnings)
        row(QStringLiteral("Slower than planned"), esc(w));
    if (!r.cudaGraphs.empty())
        row(QStringLiteral("CUDA graphs"), esc(r.cudaGraphs));
    if (!r.secondsPerPhase.empty()) {
        QStringList t;
        double total = 0;
        for (const auto& [phase, s] : r.secondsPerPhase) {
            t << QStringLiteral("%1 %2 s").arg(esc(phase)).arg(s, 0, 'f', 1);
            total += s;
        }
        row(QStringLiteral("Time"), QStringLiteral("%1 s (%2)").arg(total, 0, 'f', 1).arg(t.join(QStringLiteral(", "))));
    }
    if (!r.loras.empty()) {
        QStringList l;
        for (const auto& lora : r.loras)
            l << QStringLiteral("%1 × %2 (%3)")
                     .arg(esc(QFileInfo(QString::fromStdString(lora.path)).fileName().toStdString()))
                     .arg(lora.strength)
                     .arg(esc(lora.status));
        row(QStringLiteral("LoRAs"), l.join(QStringLiteral("<br>")));
    }
    const auto made = QDateTime::fromString(QString::fromStdString(r.created), Qt::ISODate);
    row(QStringLiteral("Made"),
        (made.isValid() ? QLocale().toString(made.toLocalTime(), QLocale::LongFormat).toHtmlEscaped() : esc(r.created))
            + (r.app.empty() ? QString() : QStringLiteral(" by ") + esc(r.app)));
    row(QStringLiteral("File"),
        item.path.toHtmlEscaped()
            + QStringLiteral(" (%1)").arg(
                QString::fromStdString(humanBytes(static_cast<std::uint64_t>(std::max<qint64>(0, item.fileBytes))))));
    h += QStringLiteral("</table>");
    if (!r.files.empty()) {
        h += QStringLiteral("<h4 style='margin-bottom:2px'>Weights</h4>");
        for (const auto& f : r.files)
            h += QStringLiteral("<p style='margin:2px 0'>%1<br><span style='color:#8a93a3'>%2 · %3</span></p>")
                     .arg(esc(QFileInfo(QString::fromStdString(f.path)).fileName().toStdString()),
                         QString::fromStdString(humanBytes(static_cast<std::uint64_t>(std::max<std::int64_t>(0, f.bytes)))),
                         f.sha256.empty() ? QStringLiteral("not hashed")
                                          : QStringLiteral("sha256 ") + esc(f.sha256.substr(0, 16)) + QStringLiteral("…"));
    }
    return h;
}

}  // namespace

// A key that works anywhere inside `scope`.
template <typename F>
void addShortcut(QObject* receiver, const QKeySequence& key, QWidget* scope, F f)
{
    auto* s = new QShortcut(key, scope);
    s->setContext(Qt::WidgetWithChildrenShortcut);
    QObject::connect(s, &QShortcut::activated, receiver, f);
}

GalleryPage::GalleryPage(gallery::Gallery* gallery, QWidget* parent)
    : QWidget(parent), m_gallery(gallery), m_model(new GalleryModel(gallery, this)), m_filter(new GalleryFilter(this))
{
    m_filter->setSourceModel(m_model);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(28, 24, 28, 16);
    addPageHeader(layout, tr("Gallery"), tr("Every output, with playback and the recipe that made it."));

    m_problem = new QLabel;
    m_problem->setObjectName(QStringLiteral("galleryProblem"));
    m_problem->setWordWrap(true);
    m_problem->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_problem->setStyleSheet(QStringLiteral("color:#e8a070"));
    m_problem->hide();
    layout->addWidget(m_problem);

    m_undoBar = new QWidget;
    auto* undo = new QHBoxLayout(m_undoBar);
    undo->setContentsMargins(0, 0, 0, 0);
    m_undoLabel = new QLabel;
    auto* undoButton = new QPushButton(tr("Undo"));
    undoButton->setObjectName(QStringLiteral("undo"));
    undo->addWidget(m_undoLabel, 1);
    undo->addWidget(undoButton);
    m_undoBar->hide();
    layout->addWidget(m_undoBar);
    m_undoTimer = new QTimer(this);
    m_undoTimer->setSingleShot(true);
    m_undoTimer->setInterval(20000);
    connect(m_undoTimer, &QTimer::timeout, m_undoBar, &QWidget::hide);
    connect(undoButton, &QPushButton::clicked, this, &GalleryPage::undoDelete);

    m_stack = new QStackedWidget;
    layout->addWidget(m_stack, 1);

    m_stack->addWidget(gridView());
    m_stack->addWidget(detailView());
    connectGallery();

    if (!m_gallery->isOpen())
        showProblem(tr("The gallery database cannot be opened (%1); outputs are still written to the outputs folder.")
                        .arg(m_gallery->databaseFile()));
    refreshModels();
    updateCount();
}

// The grid of every output, its search, filters and order, and what a row offers.
QWidget* GalleryPage::gridView()
{
    auto* gridPage = new QWidget;
    auto* gridLayout = new QVBoxLayout(gridPage);
    gridLayout->setContentsMargins(0, 0, 0, 0);
    auto* bar = new QHBoxLayout;
    m_search = new QLineEdit;
    m_search->setObjectName(QStringLiteral("search"));
    m_search->setAccessibleName(tr("Search prompts and file names"));
    m_search->setPlaceholderText(tr("Search prompts and file names"));
    m_search->setClearButtonEnabled(true);
    m_modelFilter = new QComboBox;
    m_modelFilter->setObjectName(QStringLiteral("modelFilter"));
    m_modelFilter->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    auto* when = new QComboBox;
    when->setObjectName(QStringLiteral("dateFilter"));
    when->addItem(tr("Any time"), 0);
    when->addItem(tr("Today"), 1);
    when->addItem(tr("Last 7 days"), 7);
    when->addItem(tr("Last 30 days"), 30);
    m_sort = new QComboBox;
    m_sort->setObjectName(QStringLiteral("sort"));
    m_sort->addItem(tr("Newest first"), static_cast<int>(GalleryFilter::Order::Newest));
    m_sort->addItem(tr("Oldest first"), static_cast<int>(GalleryFilter::Order::Oldest));
    m_sort->addItem(tr("By model"), static_cast<int>(GalleryFilter::Order::Model));
    m_sort->addItem(tr("By prompt"), static_cast<int>(GalleryFilter::Order::Prompt));
    m_count = new QLabel;
    m_count->setObjectName(QStringLiteral("count"));
    auto* import = new QPushButton(tr("Import folder…"));
    import->setObjectName(QStringLiteral("importFolder"));
    import->setToolTip(tr("List the videos and images of a folder here; files made by Vireo get their recipe back"));
    bar->addWidget(m_search, 1);
    bar->addWidget(m_modelFilter);
    bar->addWidget(when);
    bar->addWidget(m_sort);
    bar->addWidget(m_count);
    bar->addWidget(import);
    gridLayout->addLayout(bar);

    m_gridStack = new QStackedWidget;
    m_grid = new QListView;
    m_grid->setObjectName(QStringLiteral("grid"));
    m_grid->setViewMode(QListView::IconMode);
    m_grid->setResizeMode(QListView::Adjust);
    m_grid->setMovement(QListView::Static);
    m_grid->setUniformItemSizes(true);  // no per-row size queries: 10,000 rows lay out at once
    m_grid->setLayoutMode(QListView::Batched);
    m_grid->setBatchSize(500);
    m_grid->setSelectionMode(QAbstractItemView::SingleSelection);
    m_grid->setVerticalScrollMode(QAbstractItemView::ScrollPerPixel);
    m_grid->setMouseTracking(true);
    m_grid->setSpacing(4);
    m_grid->setItemDelegate(new GalleryDelegate(m_grid));
    m_grid->setModel(m_filter);
    m_gridStack->addWidget(makeEmptyState(tr("Nothing generated yet"),
        tr("Videos you make on the Generate page, or with vireo-cli generate, are listed here with their full recipe. "
           "Import a folder to list older ones.")));
    m_gridStack->addWidget(m_grid);
    gridLayout->addWidget(m_gridStack, 1);

    connect(m_search, &QLineEdit::textChanged, this, [this](const QString& t) {
        m_filter->setText(t);
        updateCount();
    });
    connect(m_modelFilter, &QComboBox::currentIndexChanged, this, [this] {
        m_filter->setModelTitle(m_modelFilter->currentData().toString());
        updateCount();
    });
    connect(when, &QComboBox::currentIndexChanged, this, [this, when] {
        const int days = when->currentData().toInt();
        // Calendar days in local time: "today" starts at midnight, not 24 hours ago.
        m_filter->setSince(days == 0 ? QDateTime() : QDateTime(QDate::currentDate().addDays(1 - days), QTime(0, 0)));
        updateCount();
    });
    connect(m_sort, &QComboBox::currentIndexChanged, this,
        [this] { m_filter->setOrder(static_cast<GalleryFilter::Order>(m_sort->currentData().toInt())); });
    connect(m_grid, &QListView::activated, this, [this](const QModelIndex& i) { openItem(i.data(GalleryModel::IdRole).toLongLong()); });
    connect(import, &QPushButton::clicked, this, [this] {
        const auto folder = QFileDialog::getExistingDirectory(this, tr("Import a folder of videos and images"));
        if (!folder.isEmpty()) {
            m_gallery->importFolder(folder);
            m_count->setText(tr("Importing…"));
        }
    });
    m_grid->setContextMenuPolicy(Qt::CustomContextMenu);
    connect(m_grid, &QListView::customContextMenuRequested, this, [this](const QPoint& at) {
        const auto index = m_grid->indexAt(at);
        if (!index.isValid())
            return;
        const qint64 id = index.data(GalleryModel::IdRole).toLongLong();
        const auto item = m_gallery->item(id);
        if (!item)
            return;
        QMenu menu(this);
        menu.addAction(tr("Open"), this, [this, id] { openItem(id); });
        const bool image = item->kind == QStringLiteral("image");
        menu.addAction(image ? tr("Animate this image") : tr("Use first frame as start image"), this, [this, id] {
            QString error;
            if (!useAsStartImage(id, &error))
                QMessageBox::warning(this, tr("Start image"), error);
        });
        if (!image)
            menu.addAction(tr("Extend this clip"), this, [this, id] {
                QString error;
                if (!extendClip(id, &error))
                    QMessageBox::warning(this, tr("Extend this clip"), error);
            });
        menu.exec(m_grid->viewport()->mapToGlobal(at));
    });
    addShortcut(this, QKeySequence::Delete, m_grid, [this] {
        const auto i = m_grid->currentIndex();
        if (i.isValid()) {
            m_current = i.data(GalleryModel::IdRole).toLongLong();
            deleteCurrent();
        }
    });

    return gridPage;
}

// One output: the player or picture, frame stepping, the recipe and what can be done with it.
QWidget* GalleryPage::detailView()
{
    auto* detail = new QWidget;
    auto* detailLayout = new QVBoxLayout(detail);
    detailLayout->setContentsMargins(0, 0, 0, 0);
    auto* top = new QHBoxLayout;
    auto* back = new QPushButton(tr("← All outputs"));
    back->setObjectName(QStringLiteral("back"));
    m_title = new QLabel;
    m_title->setObjectName(QStringLiteral("detailTitle"));
    m_title->setTextInteractionFlags(Qt::TextSelectableByMouse);
    top->addWidget(back);
    top->addWidget(m_title, 1);
    detailLayout->addLayout(top);
    auto* split = new QSplitter(Qt::Horizontal);
    auto* left = new QWidget;
    auto* leftLayout = new QVBoxLayout(left);
    leftLayout->setContentsMargins(0, 0, 0, 0);
    m_media = new QStackedWidget;
    m_video = new VideoView;
    m_video->setObjectName(QStringLiteral("video"));
    m_video->setMinimumSize(320, 180);
    m_image = new QLabel;
    m_image->setAlignment(Qt::AlignCenter);
    m_placeholder = new QLabel;
    m_placeholder->setObjectName(QStringLiteral("placeholder"));
    m_placeholder->setAlignment(Qt::AlignCenter);
    m_placeholder->setWordWrap(true);
    m_placeholder->setStyleSheet(QStringLiteral("background:#121418;color:#c8ccd4;padding:24px"));
    m_media->addWidget(m_video);
    m_media->addWidget(m_image);
    m_media->addWidget(m_placeholder);
    leftLayout->addWidget(m_media, 1);
    m_transport = new QWidget;
    auto* transport = new QHBoxLayout(m_transport);
    transport->setContentsMargins(0, 0, 0, 0);
    m_play = new QPushButton(tr("Play"));
    m_play->setObjectName(QStringLiteral("play"));
    auto* prev = new QPushButton(QStringLiteral("◀"));
    prev->setObjectName(QStringLiteral("prevFrame"));
    prev->setToolTip(tr("Previous frame (,)"));
    auto* next = new QPushButton(QStringLiteral("▶"));
    next->setObjectName(QStringLiteral("nextFrame"));
    next->setToolTip(tr("Next frame (.)"));
    for (auto* b : {prev, next})
        b->setFixedWidth(36);
    m_position = new QSlider(Qt::Horizontal);
    m_position->setObjectName(QStringLiteral("scrub"));
    m_time = new QLabel(QStringLiteral("0:00.00"));
    m_time->setObjectName(QStringLiteral("time"));
    m_time->setMinimumWidth(170);
    transport->addWidget(m_play);
    transport->addWidget(prev);
    transport->addWidget(m_position, 1);
    transport->addWidget(next);
    transport->addWidget(m_time);
    leftLayout->addWidget(m_transport);
    split->addWidget(left);

    auto* right = new QWidget;
    auto* rightLayout = new QVBoxLayout(right);
    rightLayout->setContentsMargins(8, 0, 0, 0);
    m_detailProblem = new QLabel;
    m_detailProblem->setObjectName(QStringLiteral("detailProblem"));
    m_detailProblem->setWordWrap(true);
    m_detailProblem->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_detailProblem->setStyleSheet(QStringLiteral("color:#e8a070"));
    rightLayout->addWidget(m_detailProblem);
    auto* fix = new QHBoxLayout;
    m_locate = new QPushButton(tr("Locate…"));
    m_locate->setObjectName(QStringLiteral("locate"));
    m_locate->setToolTip(tr("The file was moved: point to where it is now"));
    m_forget = new QPushButton(tr("Forget"));
    m_forget->setObjectName(QStringLiteral("forget"));
    m_forget->setToolTip(tr("Remove it from the gallery (no file is touched)"));
    fix->addWidget(m_locate);
    fix->addWidget(m_forget);
    fix->addStretch(1);
    rightLayout->addLayout(fix);
    m_recipeView = new QTextBrowser;
    m_recipeView->setObjectName(QStringLiteral("recipe"));
    m_recipeView->setOpenLinks(false);
    rightLayout->addWidget(m_recipeView, 1);
    auto* actions = new QGridLayout;
    m_again = new QPushButton(tr("Generate again"));
    m_again->setObjectName(QStringLiteral("generateAgain"));
    m_again->setProperty("accent", true);
    m_again->setToolTip(tr("Fill the Generate page with this recipe, the same seed included"));
    m_vary = new QPushButton(tr("Vary"));
    m_vary->setObjectName(QStringLiteral("vary"));
    m_vary->setToolTip(tr("The same recipe with a new seed"));
    m_copyPrompt = new QPushButton(tr("Copy prompt"));
    m_copyPrompt->setObjectName(QStringLiteral("copyPrompt"));
    m_reveal = new QPushButton(tr("Show in folder"));
    m_reveal->setObjectName(QStringLiteral("reveal"));
    m_export = new QPushButton(tr("Export…"));
    m_export->setObjectName(QStringLiteral("export"));
    m_delete = new QPushButton(tr("Move to trash"));
    m_delete->setObjectName(QStringLiteral("delete"));
    actions->addWidget(m_again, 0, 0);
    actions->addWidget(m_vary, 0, 1);
    actions->addWidget(m_copyPrompt, 1, 0);
    actions->addWidget(m_reveal, 1, 1);
    actions->addWidget(m_export, 2, 0);
    actions->addWidget(m_delete, 2, 1);
    m_startImage = new QPushButton(tr("Use as start image"));
    m_startImage->setObjectName(QStringLiteral("useAsStartImage"));
    actions->addWidget(m_startImage, 3, 0, 1, 2);
    m_extend = new QPushButton(tr("Extend this clip"));
    m_extend->setObjectName(QStringLiteral("extendClip"));
    m_extend->setToolTip(tr("Fill the Generate page with this recipe and a new seed, starting from this video's last 9 frames"));
    actions->addWidget(m_extend, 4, 0, 1, 2);
    m_retakeSpan = new QPushButton(tr("Retake a span…"));
    m_retakeSpan->setObjectName(QStringLiteral("retakeSpan"));
    m_retakeSpan->setToolTip(tr("Make a few seconds of this clip again from its recipe (video, sound or both), keeping the rest"));
    actions->addWidget(m_retakeSpan, 5, 0, 1, 2);
    rightLayout->addLayout(actions);
    split->addWidget(right);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);
    detailLayout->addWidget(split, 1);

    connect(back, &QPushButton::clicked, this, &GalleryPage::showGrid);
    connect(m_play, &QPushButton::clicked, this, [this] {
        if (!m_player)
            return;
        m_player->playbackState() == QMediaPlayer::PlayingState ? m_player->pause() : m_player->play();
    });
    connect(prev, &QPushButton::clicked, this, [this] { stepFrames(-1); });
    connect(next, &QPushButton::clicked, this, [this] { stepFrames(1); });
    connect(m_position, &QSlider::sliderMoved, this, [this](int ms) {
        if (m_player) {
            m_player->setPosition(ms);
            updatePosition(ms);
        }
    });
    addShortcut(this, QKeySequence(Qt::Key_Escape), detail, [this] { showGrid(); });
    addShortcut(this, QKeySequence(Qt::Key_Comma), detail, [this] { stepFrames(-1); });
    addShortcut(this, QKeySequence(Qt::Key_Period), detail, [this] { stepFrames(1); });
    addShortcut(this, QKeySequence(Qt::Key_Space), detail, [this] { m_play->click(); });
    addShortcut(this, QKeySequence::Delete, detail, [this] { deleteCurrent(); });
    connectActions();
    return detail;
}

// The detail view's actions on the output shown.
void GalleryPage::connectActions()
{
    // The conditioning images kept beside the output ("<stem>.cond0.png", by name in the
    // recipe) by their full path, so the Generate page finds them wherever the output is now.
    auto withCopies = [this] {
        auto r = *m_recipe;
        const auto item = m_gallery->item(m_current);
        // A plain file name only: a recipe is read from files anyone may have written.
        const auto beside = [&item](std::string& copy) {
            const auto name = QString::fromStdString(copy);
            const bool plain =
                !name.isEmpty() && !name.contains(QLatin1Char('/')) && name != QStringLiteral("..") && name != QStringLiteral(".");
            copy = item && plain ? QFileInfo(item->path).dir().filePath(name).toStdString() : std::string();
        };
        for (auto& c : r.conditions) {
            beside(c.copy);
            if (!c.soundCopy.empty())
                beside(c.soundCopy);
        }
        if (r.audio)
            beside(r.audio->copy);
        if (r.retake) {
            beside(r.retake->copy);
            if (!r.retake->soundCopy.empty())
                beside(r.retake->soundCopy);
        }
        for (auto& k : r.references)
            beside(k.copy);
        return r;
    };
    connect(m_again, &QPushButton::clicked, this, [this, withCopies] {
        if (m_recipe)
            emit generateRequested(withCopies(), false);
    });
    connect(m_vary, &QPushButton::clicked, this, [this, withCopies] {
        if (m_recipe)
            emit generateRequested(withCopies(), true);
    });
    connect(m_startImage, &QPushButton::clicked, this, [this] {
        QString error;
        if (!useAsStartImage(m_current, &error))
            QMessageBox::warning(this, tr("Start image"), error);
    });
    connect(m_extend, &QPushButton::clicked, this, [this] {
        QString error;
        if (!extendClip(m_current, &error))
            QMessageBox::warning(this, tr("Extend this clip"), error);
    });
    connect(m_retakeSpan, &QPushButton::clicked, this, [this] {
        const auto item = m_gallery->item(m_current);
        if (!item)
            return;
        // The span around where the clip is playing, a second and a half wide, inside it.
        const double length = item->durationSeconds > 0 ? item->durationSeconds : 5.0;
        const double at = m_player ? static_cast<double>(m_player->position()) / 1000.0 : 0.0;
        QDialog dialog(this);
        dialog.setWindowTitle(tr("Retake a span"));
        auto* form = new QFormLayout(&dialog);
        auto* from = new QDoubleSpinBox;
        auto* to = new QDoubleSpinBox;
        for (auto* box : {from, to}) {
            box->setRange(0, length);
            box->setDecimals(2);
            box->setSingleStep(0.1);
            box->setSuffix(tr(" s"));
        }
        from->setObjectName(QStringLiteral("retakeFrom"));
        from->setAccessibleName(tr("Retake from, in seconds"));
        to->setObjectName(QStringLiteral("retakeTo"));
        to->setAccessibleName(tr("Retake to, in seconds"));
        from->setValue(std::clamp(at - 0.75, 0.0, std::max(0.0, length - 1.5)));
        to->setValue(std::min(length, from->value() + 1.5));
        auto* what = new QComboBox;
        what->setAccessibleName(tr("What the retake makes again"));
        what->addItem(tr("The video and its sound"), 3);
        what->addItem(tr("The video; keep the sound"), 1);
        what->addItem(tr("The sound; keep the video"), 2);
        form->addRow(tr("From"), from);
        form->addRow(tr("To"), to);
        form->addRow(tr("Make again"), what);
        auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
        form->addRow(buttons);
        connect(buttons, &QDialogButtonBox::accepted, &dialog, &QDialog::accept);
        connect(buttons, &QDialogButtonBox::rejected, &dialog, &QDialog::reject);
        if (dialog.exec() != QDialog::Accepted)
            return;
        const int streams = what->currentData().toInt();
        QString error;
        if (!retakeClip(m_current, from->value(), to->value(), streams & 1, streams & 2, &error))
            QMessageBox::warning(this, tr("Retake a span"), error);
    });
    connect(m_copyPrompt, &QPushButton::clicked, this, [this] {
        if (const auto item = m_gallery->item(m_current)) {
            QGuiApplication::clipboard()->setText(item->prompt);
            emit message(tr("Prompt copied"));
        }
    });
    connect(m_reveal, &QPushButton::clicked, this, &GalleryPage::reveal);
    connect(m_export, &QPushButton::clicked, this, [this] {
        const auto item = m_gallery->item(m_current);
        if (!item)
            return;
        const auto to = QFileDialog::getSaveFileName(
            this, tr("Export a copy"), QFileInfo(item->path).fileName(), {}, nullptr, QFileDialog::DontConfirmOverwrite);
        QString error;
        if (!to.isEmpty() && !exportCurrent(to, &error))
            QMessageBox::warning(this, tr("Export"), error);
    });
    connect(m_delete, &QPushButton::clicked, this, &GalleryPage::deleteCurrent);
    connect(m_locate, &QPushButton::clicked, this, [this] {
        const auto item = m_gallery->item(m_current);
        if (!item)
            return;
        const auto to = QFileDialog::getOpenFileName(this, tr("Where is %1 now?").arg(QFileInfo(item->path).fileName()),
            QFileInfo(item->path).absolutePath(), tr("Videos and images (*.mp4 *.png)"));
        QString error;
        if (!to.isEmpty() && !locateCurrent(to, &error))
            QMessageBox::warning(this, tr("Locate"), error);
    });
    connect(m_forget, &QPushButton::clicked, this, &GalleryPage::forgetCurrent);
}

// The gallery's news: scans, problems, rows that changed under the page.
void GalleryPage::connectGallery()
{
    connect(m_gallery, &gallery::Gallery::scanFinished, this, [this](const QString& folder, int added, const QString& error) {
        updateCount();
        if (error.isEmpty() && folder != m_gallery->outputsFolder())
            emit message(tr("%1 added from %2").arg(countOf(added, tr("file"), tr("files")), folder));
    });
    connect(m_gallery, &gallery::Gallery::problem, this, &GalleryPage::showProblem);
    connect(m_gallery, &gallery::Gallery::itemsChanged, this, [this] {
        refreshModels();
        updateCount();
        if (m_current && m_stack->currentIndex() == 1) {
            // The shown row changed (missing now, relocated, forgotten by another window).
            if (!m_gallery->item(m_current))
                showGrid();
        }
    });
}

void GalleryPage::showEvent(QShowEvent* event)
{
    QWidget::showEvent(event);
    // Files deleted, moved back or dropped into the outputs folder while the studio ran.
    if (!m_lastRescan.isValid() || m_lastRescan.elapsed() > 10000) {
        m_lastRescan.start();
        if (m_gallery->isOpen())
            m_gallery->rescan();
    }
}

void GalleryPage::refreshModels()
{
    const auto models = m_model->models();
    const auto current = m_modelFilter->currentData().toString();
    QStringList have;
    for (int i = 1; i < m_modelFilter->count(); ++i)
        have << m_modelFilter->itemData(i).toString();
    if (have == models && m_modelFilter->count() > 0)
        return;
    const QSignalBlocker block(m_modelFilter);
    m_modelFilter->clear();
    m_modelFilter->addItem(tr("All models"), QString());
    for (const auto& m : models)
        m_modelFilter->addItem(m, m);
    m_modelFilter->setCurrentIndex(std::max(0, m_modelFilter->findData(current)));
}

void GalleryPage::updateCount()
{
    const int all = m_model->rowCount();
    const int shown = m_filter->rowCount();
    m_gridStack->setCurrentIndex(all == 0 ? 0 : 1);
    QString text = shown == all ? countOf(all, tr("output"), tr("outputs")) : tr("%1 of %2").arg(shown).arg(all);
    if (m_gallery->scanning())
        text += tr(", scanning…");
    m_count->setText(text);
}

void GalleryPage::showProblem(const QString& text)
{
    m_problem->setText(text);
    m_problem->setVisible(!text.isEmpty());
}

void GalleryPage::showGrid()
{
    if (m_player) {
        m_player->stop();
        m_player->setSource({});
    }
    m_stack->setCurrentIndex(0);
    if (const auto i = m_model->indexOfId(m_current); i.isValid())
        m_grid->setCurrentIndex(m_filter->mapFromSource(i));
    m_grid->setFocus();
}

bool GalleryPage::openItem(qint64 id)
{
    const auto item = m_gallery->item(id);
    if (!item)
        return false;
    m_current = id;
    m_recipe = m_gallery->recipe(id);
    showDetail();
    m_stack->setCurrentIndex(1);
    return true;
}

void GalleryPage::showDetail()
{
    const auto item = m_gallery->item(m_current);
    if (!item)
        return;
    m_title->setText(QStringLiteral("<b>%1</b>").arg(QFileInfo(item->path).fileName().toHtmlEscaped()));
    m_recipeView->setHtml(m_recipe ? recipeHtml(*m_recipe, *item)
                                   : tr("<p>This file carries no Vireo recipe (it was made elsewhere, or its recipe was stripped).</p>"
                                        "<p>%1</p>")
                                         .arg(item->path.toHtmlEscaped()));
    m_again->setEnabled(m_recipe.has_value());
    m_vary->setEnabled(m_recipe.has_value());
    m_startImage->setText(item->kind == QStringLiteral("image") ? tr("Animate this image") : tr("Use first frame as start image"));
    m_startImage->setToolTip(tr("Fill the Generate page's start image with it, to make a video that starts from it"));
    m_startImage->setEnabled(QFileInfo::exists(item->path) && item->thumbnailState != 2);
    m_extend->setVisible(item->kind != QStringLiteral("image"));
    m_extend->setEnabled(QFileInfo::exists(item->path) && item->thumbnailState != 2);
    m_retakeSpan->setVisible(item->kind != QStringLiteral("image"));
    m_retakeSpan->setEnabled(m_extend->isEnabled());
    m_copyPrompt->setEnabled(!item->prompt.isEmpty());
    const bool present = QFileInfo::exists(item->path);
    if (present == item->missing)
        m_gallery->markMissing(item->id, !present);
    m_locate->setVisible(!present);
    m_forget->setVisible(!present);
    m_reveal->setEnabled(present);
    m_export->setEnabled(present);
    m_fps = m_recipe && m_recipe->request.fps > 0 ? m_recipe->request.fps : item->fps > 0 ? item->fps : 24;
    if (m_player) {
        m_player->stop();
        m_player->setSource({});
    }
    m_video->clear();
    m_transport->setVisible(false);
    if (!present) {
        m_detailProblem->setText(tr("This file is gone: %1. It was moved or deleted outside the studio. "
                                    "Locate it, or forget it (its recipe goes with it).")
                                     .arg(item->path));
        m_placeholder->setText(tr("Missing"));
        m_media->setCurrentWidget(m_placeholder);
        return;
    }
    m_detailProblem->setText(item->problem);
    if (item->thumbnailState == 2) {
        // Damaged or truncated: say so instead of handing it to a decoder again.
        m_placeholder->setText(tr("This file cannot be played.\n%1").arg(item->problem));
        m_media->setCurrentWidget(m_placeholder);
        return;
    }
    if (item->kind == QStringLiteral("image")) {
        QPixmap pixmap(item->path);
        if (pixmap.isNull()) {
            m_placeholder->setText(tr("This image cannot be read."));
            m_media->setCurrentWidget(m_placeholder);
            return;
        }
        m_image->setPixmap(pixmap.scaled(m_media->size().boundedTo(pixmap.size()), Qt::KeepAspectRatio, Qt::SmoothTransformation));
        m_media->setCurrentWidget(m_image);
        return;
    }
    ensurePlayer();
    m_media->setCurrentWidget(m_video);
    m_transport->setVisible(true);
    if (m_noAudioDevice)
        m_detailProblem->setText(tr("No audio output device: the clip plays without its sound."));
    m_player->setSource(QUrl::fromLocalFile(item->path));
    m_player->play();
}

std::optional<output::Recipe> GalleryPage::startFromClip(qint64 id, const QString& verb, QString* error, bool* hasRecipe) const
{
    const auto item = m_gallery->item(id);
    QString refused;
    if (!item)
        refused = tr("This item is no longer in the gallery.");
    else if (item->kind == QStringLiteral("image"))
        refused = tr("%1 is a picture: only a clip can be %2.").arg(item->path, verb);
    else if (!QFileInfo::exists(item->path))
        refused = tr("%1 is gone.").arg(item->path);
    else if (item->thumbnailState == 2)
        refused = tr("%1 cannot be played: %2").arg(item->path, item->problem);
    if (!refused.isEmpty()) {
        if (error)
            *error = refused;
        return std::nullopt;
    }
    // The recipe without what it was conditioned on: the clip is the start now.
    const auto recipe = m_gallery->recipe(id);
    *hasRecipe = recipe.has_value();
    output::Recipe r = recipe ? *recipe : output::Recipe{};
    r.conditions.clear();
    r.audio.reset();
    r.retake.reset();
    // Reference frame k guided output frame k; an extension or a retake has other frames (its
    // IC-LoRA stays listed, and the LoRA panel asks for a clip or its removal).
    r.references.clear();
    return r;
}

bool GalleryPage::extendClip(qint64 id, QString* error)
{
    bool hasRecipe = false;
    const auto r = startFromClip(id, tr("extended"), error, &hasRecipe);
    if (!r)
        return false;
    emit extendClipRequested(m_gallery->item(id)->path, *r, hasRecipe);
    return true;
}

bool GalleryPage::retakeClip(qint64 id, double start, double end, bool video, bool audio, QString* error)
{
    bool hasRecipe = false;
    const auto r = startFromClip(id, tr("retaken"), error, &hasRecipe);
    if (!r)
        return false;
    const auto item = m_gallery->item(id);
    if (!(start >= 0 && end > start && (item->durationSeconds <= 0 || start < item->durationSeconds))) {
        if (error)
            *error = tr("The span must start before it ends, inside the clip (%1 to %2 s asked).").arg(start).arg(end);
        return false;
    }
    emit retakeRequested(item->path, *r, hasRecipe, start, end, video, audio);
    return true;
}

bool GalleryPage::useAsStartImage(qint64 id, QString* error)
{
    const auto item = m_gallery->item(id);
    if (!item || !QFileInfo::exists(item->path)) {
        if (error)
            *error = item ? tr("%1 is gone (moved or deleted).").arg(item->path) : tr("That output is no longer in the gallery.");
        return false;
    }
    if (item->kind == QStringLiteral("image")) {
        emit startImageRequested(item->path);
        return true;
    }
    if (m_player)
        m_player->pause();
    const auto folder = QDir(QStandardPaths::writableLocation(QStandardPaths::CacheLocation)).filePath(QStringLiteral("start-images"));
    auto frame = runtime::saveFirstFrame(item->path, folder);
    if (!frame) {
        if (error)
            *error = QString::fromStdString(frame.error().message);
        return false;
    }
    emit startImageRequested(*frame);
    return true;
}

void GalleryPage::ensurePlayer()
{
    // Created on first use: the media backend costs start-up time the window does not need.
    if (m_player)
        return;
    m_player = makeClipPlayer(m_video, m_play, m_position, this, &m_noAudioDevice);
    connect(m_player, &QMediaPlayer::positionChanged, this, &GalleryPage::updatePosition);
    connect(m_player, &QMediaPlayer::errorOccurred, this,
        [this](QMediaPlayer::Error, const QString& message) { m_detailProblem->setText(tr("Playback: %1").arg(message)); });
}

void GalleryPage::updatePosition(qint64 ms)
{
    const qint64 frame = static_cast<qint64>(std::floor(static_cast<double>(ms) * m_fps / 1000.0 + 1e-6));
    const qint64 frames = m_player ? static_cast<qint64>(std::llround(static_cast<double>(m_player->duration()) * m_fps / 1000.0)) : 0;
    m_time->setText(tr("%1 · frame %2 of %3").arg(timeText(ms)).arg(frame + 1).arg(std::max<qint64>(frames, frame + 1)));
}

void GalleryPage::stepFrames(int frames)
{
    if (!m_player || m_player->source().isEmpty())
        return;
    m_player->pause();
    // The middle of the target frame, so rounding never lands on its neighbour.
    const double frameMs = 1000.0 / m_fps;
    const qint64 current = static_cast<qint64>(std::floor(static_cast<double>(m_player->position()) / frameMs + 1e-6));
    const qint64 target =
        std::clamp<qint64>(current + frames, 0, std::max<qint64>(0, static_cast<qint64>(m_player->duration() / frameMs) - 1));
    const auto ms = static_cast<qint64>((static_cast<double>(target) + 0.5) * frameMs);
    m_player->setPosition(ms);
    updatePosition(ms);
    // Qt's FFmpeg backend moves a paused player without painting the frame it moved to: the
    // frame is decoded here, off this thread, and shown, so the picture follows the counter.
    const auto ticket = ++m_stepTicket;
    const auto path = m_player->source().toLocalFile();
    const double seconds = std::max(0.0, (static_cast<double>(target) - 0.25) / m_fps);
    const int width = std::max(64, m_video->width());
    QPointer<GalleryPage> self(this);
    QThreadPool::globalInstance()->start([self, path, seconds, width, ticket] {
        auto frame = std::make_shared<Result<QImage>>(gallery::videoFrame(path, seconds, width));
        QMetaObject::invokeMethod(
            QCoreApplication::instance(),
            [self, frame, ticket] {
                if (self && ticket == self->m_stepTicket && *frame && self->m_player
                    && self->m_player->playbackState() != QMediaPlayer::PlayingState)
                    self->m_video->showFrame(**frame);
            },
            Qt::QueuedConnection);
    });
}

void GalleryPage::reveal()
{
    const auto item = m_gallery->item(m_current);
    if (!item)
        return;
    // The freedesktop file manager interface selects the file; without one, the folder opens.
    auto call = QDBusMessage::createMethodCall(QStringLiteral("org.freedesktop.FileManager1"),
        QStringLiteral("/org/freedesktop/FileManager1"), QStringLiteral("org.freedesktop.FileManager1"), QStringLiteral("ShowItems"));
    call << QStringList{QUrl::fromLocalFile(item->path).toString()} << QString();
    const auto bus = QDBusConnection::sessionBus();
    if (bus.isConnected() && bus.call(call, QDBus::Block, 2000).type() == QDBusMessage::ReplyMessage)
        return;
    if (!QDesktopServices::openUrl(QUrl::fromLocalFile(QFileInfo(item->path).absolutePath())))
        QMessageBox::information(this, tr("Show in folder"), tr("No file manager could be opened. The file is:\n%1").arg(item->path));
}

bool GalleryPage::deleteCurrent()
{
    const auto item = m_gallery->item(m_current);
    if (!item)
        return false;
    if (m_player) {
        m_player->stop();
        m_player->setSource({});
    }
    auto token = m_gallery->trash(m_current);
    if (!token) {
        QMessageBox::warning(this, tr("Move to trash"), QString::fromStdString(token.error().message));
        return false;
    }
    m_undoToken = *token;
    m_undoLabel->setText(tr("%1 was moved to the trash.").arg(QFileInfo(item->path).fileName()));
    m_undoBar->show();
    m_undoTimer->start();
    showGrid();
    return true;
}

bool GalleryPage::undoDelete()
{
    if (m_undoToken.isEmpty())
        return false;
    auto id = m_gallery->restore(m_undoToken);
    m_undoBar->hide();
    m_undoToken.clear();
    if (!id) {
        showProblem(QString::fromStdString(id.error().message));
        return false;
    }
    m_current = *id;
    if (const auto i = m_model->indexOfId(*id); i.isValid())
        m_grid->setCurrentIndex(m_filter->mapFromSource(i));
    return true;
}

bool GalleryPage::exportCurrent(const QString& destination, QString* error)
{
    auto r = m_gallery->exportTo(m_current, destination);
    if (!r && error)
        *error = QString::fromStdString(r.error().message);
    if (r)
        emit message(tr("Exported to %1").arg(destination));
    return r.ok();
}

bool GalleryPage::locateCurrent(const QString& newPath, QString* error)
{
    auto r = m_gallery->relocate(m_current, newPath);
    if (!r) {
        if (error)
            *error = QString::fromStdString(r.error().message);
        return false;
    }
    showDetail();
    return true;
}

bool GalleryPage::forgetCurrent()
{
    if (!m_gallery->forget(m_current))
        return false;
    showGrid();
    return true;
}

}  // namespace vireo::ui
