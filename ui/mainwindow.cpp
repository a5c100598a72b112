#include "ui/mainwindow.h"

#include "core/api/apiservice.h"
#include "core/catalog/catalog.h"
#include "core/runtime/devicepool.h"
#include "core/studio/studio.h"
#include "core/hub/downloadmanager.h"
#include "core/hub/hfcache.h"
#include "core/settings/studiosettings.h"
#include "ui/pages/catalogpanel.h"
#include "ui/pages/downloadspage.h"
#include "ui/pages/generatepage.h"
#include "ui/pages/lorapanel.h"
#include "ui/pages/modelspage.h"
#include "ui/pages/settingspage.h"
#include "ui/pages/gallerypage.h"

#include <QAction>
#include <QCloseEvent>
#include <QHBoxLayout>
#include <QListWidget>
#include <QMessageBox>
#include <QPainter>
#include <QSettings>
#include <QStackedWidget>
#include <QStatusBar>
#include <QStyle>

#include <cmath>

namespace vireo::ui {

namespace {

// The style's icons are drawn for light backgrounds: Fusion's play triangle is near black and
// vanishes on the dark sidebar. An icon with less than a quarter of the text's contrast is shown
// as its shape in the text colour; the others keep their own colours and inner lines.
QIcon sidebarIcon(const QIcon& icon, const QColor& text, const QColor& background)
{
    const QImage probe = icon.pixmap(18, 18).toImage().convertToFormat(QImage::Format_ARGB32);
    double sum = 0, weight = 0;
    for (int y = 0; y < probe.height(); ++y)
        for (int x = 0; x < probe.width(); ++x) {
            const QColor c = probe.pixelColor(x, y);
            sum += c.alphaF() * qGray(c.rgb());
            weight += c.alphaF();
        }
    const double grey = weight > 0 ? sum / weight : 0;
    if (std::abs(grey - qGray(background.rgb())) >= 0.25 * std::abs(qGray(text.rgb()) - qGray(background.rgb())))
        return icon;
    QIcon out;
    for (const int side : {18, 36}) {
        QPixmap shape = icon.pixmap(side, side);
        if (shape.isNull())
            continue;
        QPainter painter(&shape);
        painter.setCompositionMode(QPainter::CompositionMode_SourceIn);
        painter.fillRect(shape.rect(), text);
        painter.end();
        out.addPixmap(shape);
    }
    return out;
}

}  // namespace

MainWindow::MainWindow(core::Studio* studio, QWidget* parent)
    : QMainWindow(parent), m_studio(studio), m_navigation(new QListWidget), m_pages(new QStackedWidget), m_settings(studio->settings()),
      m_manager(studio->downloads()), m_models(new ModelsPage(studio->downloads())), m_downloads(new DownloadsPage(studio->downloads())),
      m_generate(new GeneratePage(studio)), m_gallery(new GalleryPage(studio->gallery())),
      m_settingsPage(new SettingsPage(studio->settings()))
{
    m_models->catalogPanel()->setCacheManager(studio->cache());
    m_settingsPage->setDevicePool(studio->devicePool());
    m_settingsPage->setRemoteJobs(studio->remoteJobs());
    setWindowTitle(tr("Vireo Studio"));
    setMinimumSize(900, 600);

    buildNavigation();
    auto* central = new QWidget;
    auto* layout = new QHBoxLayout(central);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->setSpacing(0);
    layout->addWidget(m_navigation);
    layout->addWidget(m_pages, 1);
    setCentralWidget(central);
    statusBar()->showMessage(tr("Ready"));
    connectPages();

    QSettings settings;
    if (!restoreGeometry(settings.value(QStringLiteral("window/geometry")).toByteArray()))
        resize(1180, 760);
    restoreState(settings.value(QStringLiteral("window/state")).toByteArray());
    showPage(static_cast<Page>(std::clamp(settings.value(QStringLiteral("window/page"), 0).toInt(), 0, 4)));
    connect(m_settings, &core::StudioSettings::changed, this, &MainWindow::applyApiSettings);
    applyApiSettings();
}

void MainWindow::applyApiSettings()
{
    const bool on = m_settings->apiEnabled();
    const auto config = QStringLiteral("%1|%2").arg(m_settings->apiPort()).arg(m_settings->apiPublic());
    if (on && m_api && config == m_apiConfig)
        return;
    delete m_api;  // its server closes every connection; jobs it queued run on in the engine
    m_api = nullptr;
    m_apiConfig.clear();
    if (!on) {
        m_settingsPage->setApiStatus(tr("Off: only this window and vireo-cli use the models."));
        return;
    }
    api::ApiService::Options o;
    o.server.port = static_cast<std::uint16_t>(m_settings->apiPort());
    o.server.host = m_settings->apiPublic() ? "0.0.0.0" : "127.0.0.1";
    QString tokenNote;
    if (m_settings->apiPublic()) {
        const auto file = api::ApiService::defaultTokenFile();
        auto token = api::ApiService::ensureToken(file);
        if (!token) {
            m_settingsPage->setApiStatus(tr("Not serving: %1").arg(QString::fromStdString(token.error().message)));
            return;
        }
        o.server.token = *token;
        tokenNote = tr(" Other machines send the bearer token kept in %1 (readable only by you).").arg(file);
    }
    auto* service = new api::ApiService(m_studio, o, this);
    if (auto started = service->start(); !started) {
        delete service;
        m_settingsPage->setApiStatus(tr("Not serving: %1").arg(QString::fromStdString(started.error().message)));
        return;
    }
    m_api = service;
    m_apiConfig = config;
    m_settingsPage->setApiStatus(tr("Serving on %1 (GET /v1/vireo/openapi.json lists the routes).").arg(service->baseUrl()) + tokenNote);
}

// The sidebar, its pages and the window's shortcuts.
void MainWindow::buildNavigation()
{
    m_navigation->setObjectName(QStringLiteral("navigation"));
    m_navigation->setFixedWidth(200);
    m_navigation->setIconSize(QSize(18, 18));
    m_navigation->setFocusPolicy(Qt::StrongFocus);
    struct Entry {
        QString label;
        QStyle::StandardPixmap icon;
        QWidget* page;
        QString tip;
    };
    const Entry entries[] = {
        {tr("Models"), QStyle::SP_DriveHDIcon, m_models, tr("Open and inspect models (Ctrl+1)")},
        {tr("Downloads"), QStyle::SP_ArrowDown, m_downloads, tr("Plans and downloads from the Hub (Ctrl+2)")},
        {tr("Generate"), QStyle::SP_MediaPlay, m_generate, tr("Make images and video (Ctrl+3)")},
        {tr("Gallery"), QStyle::SP_FileDialogContentsView, m_gallery, tr("Your outputs (Ctrl+4)")},
        {tr("Settings"), QStyle::SP_FileDialogDetailedView, m_settingsPage, tr("Cache, Hub, token and trusted repos (Ctrl+5)")},
    };
    int index = 0;
    for (const auto& e : entries) {
        auto* item = new QListWidgetItem(sidebarIcon(style()->standardIcon(e.icon), m_navigation->palette().color(QPalette::Text),
                                             m_navigation->palette().color(QPalette::Base)),
            e.label, m_navigation);
        item->setToolTip(e.tip);
        m_pages->addWidget(e.page);
        auto* action = new QAction(this);
        action->setShortcut(QKeySequence(Qt::CTRL | static_cast<Qt::Key>(Qt::Key_1 + index)));
        connect(action, &QAction::triggered, this, [this, index]() { showPage(static_cast<Page>(index)); });
        addAction(action);
        ++index;
    }
    connect(m_navigation, &QListWidget::currentRowChanged, m_pages, &QStackedWidget::setCurrentIndex);

    auto* open = new QAction(tr("Open model file"), this);
    open->setShortcut(QKeySequence::Open);
    connect(open, &QAction::triggered, this, [this]() {
        showPage(Page::Models);
        m_models->chooseFile();
    });
    addAction(open);
    auto* quit = new QAction(tr("Quit"), this);
    quit->setShortcut(QKeySequence::Quit);
    connect(quit, &QAction::triggered, this, &QWidget::close);
    addAction(quit);
}

// What one page asks of another: a model to use, a download to show, a recipe to make again.
void MainWindow::connectPages()
{
    connect(m_models, &ModelsPage::inspectionFinished, this, [this](const QString& path, bool ok) {
        statusBar()->showMessage(ok ? tr("Inspected %1").arg(path) : tr("Could not open %1").arg(path), 8000);
    });

    connect(m_models, &ModelsPage::useRequested, this, [this](const QString& path) {
        m_generate->useLocalModel(path);
        showPage(Page::Generate);
    });
    connect(m_generate, &GeneratePage::planDownloadRequested, this, [this](const QString& variant) {
        QString error;
        if (auto* task = m_manager->openVariant(variant, &error)) {
            m_downloads->showTask(task->spec().key);
            showPage(Page::Downloads);
        } else {
            statusBar()->showMessage(error, 10000);
        }
    });
    connect(m_generate, &GeneratePage::outputFinished, this,
        [this](const QString& path) { statusBar()->showMessage(tr("Saved %1").arg(path), 10000); });
    connect(m_gallery, &GalleryPage::startImageRequested, this, [this](const QString& path) {
        QString why;
        if (!m_generate->useAsStartImage(path, &why))
            statusBar()->showMessage(why, 15000);
        showPage(Page::Generate);
    });
    connect(m_gallery, &GalleryPage::extendClipRequested, this, [this](const QString& path, const output::Recipe& recipe, bool hasRecipe) {
        // The clip's own recipe with a new seed, then its last frames as the start.
        QString why, refused;
        if (hasRecipe)
            m_generate->applyRecipe(recipe, true, &why);
        if (!m_generate->extendClip(path, &refused))
            why = refused;
        if (!why.isEmpty())
            statusBar()->showMessage(why, 15000);
        showPage(Page::Generate);
    });
    connect(m_gallery, &GalleryPage::retakeRequested, this,
        [this](const QString& path, const output::Recipe& recipe, bool hasRecipe, double start, double end, bool video, bool audio) {
            // The clip's own recipe with a new seed, then the span to make again.
            QString why, refused;
            if (hasRecipe)
                m_generate->applyRecipe(recipe, true, &why);
            if (!m_generate->retakeClip(path, start, end, video, audio, &refused))
                why = refused;
            if (!why.isEmpty())
                statusBar()->showMessage(why, 15000);
            showPage(Page::Generate);
        });
    connect(m_gallery, &GalleryPage::generateRequested, this, [this](const output::Recipe& recipe, bool vary) {
        QString why;
        if (!m_generate->applyRecipe(recipe, vary, &why))
            statusBar()->showMessage(why, 15000);
        showPage(Page::Generate);
    });
    connect(m_generate->loraPanel(), &LoraPanel::hubLoraRequested, this, &MainWindow::addHubLora);
    connect(m_gallery, &GalleryPage::message, this, [this](const QString& text) { statusBar()->showMessage(text, 8000); });
    connect(m_models, &ModelsPage::taskOpened, this, [this](const QString& key) {
        m_downloads->showTask(key);
        showPage(Page::Downloads);
    });
    connect(m_manager, &hub::DownloadManager::taskAdded, this, [this](hub::DownloadTask* task) {
        connect(task, &hub::DownloadTask::stateChanged, this, [this, task](hub::DownloadTask::State state) {
            if (state == hub::DownloadTask::State::Done)
                statusBar()->showMessage(tr("%1 is ready").arg(task->spec().title), 10000);
            else if (state == hub::DownloadTask::State::Failed || state == hub::DownloadTask::State::PlanFailed)
                statusBar()->showMessage(tr("%1: %2").arg(task->spec().title, task->message()), 15000);
        });
    });
}

// A LoRA from the Hub: planned and downloaded like a model (the Downloads page asks for the
// approval a repo outside the catalog's publishers needs); its weight files join the LoRA
// panel when the download is done.
void MainWindow::addHubLora(const QString& repo)
{
    QString error;
    auto* task = m_manager->openRepo(repo, &error);
    if (!task) {
        statusBar()->showMessage(error, 15000);
        return;
    }
    m_downloads->showTask(task->spec().key);
    showPage(Page::Downloads);
    const auto key = task->spec().key;
    connect(task, &hub::DownloadTask::stateChanged, this, [this, key, repo](hub::DownloadTask::State state) {
        if (state != hub::DownloadTask::State::Done)
            return;
        const auto ready = m_manager->readyFiles(key);
        const auto cache = m_manager->hfCache();
        if (!ready || !cache)
            return;
        int added = 0;
        for (const auto& src : *ready) {
            auto dir = cache->repoDir(src.repo);
            if (!dir)
                continue;
            for (const auto& f : src.files)
                if (QString::fromStdString(f.path).endsWith(QStringLiteral(".safetensors"))) {
                    m_generate->loraPanel()->addLora(QString::fromStdString((*dir / "snapshots" / src.commit / f.path).string()));
                    ++added;
                }
        }
        statusBar()->showMessage(
            added ? tr("%1: %2 added to the LoRAs").arg(repo).arg(added) : tr("%1 holds no .safetensors file to use as a LoRA").arg(repo),
            15000);
    });
}

void MainWindow::showPage(Page page)
{
    m_navigation->setCurrentRow(static_cast<int>(page));
}

MainWindow::Page MainWindow::currentPage() const
{
    return static_cast<Page>(m_pages->currentIndex());
}

void MainWindow::closeEvent(QCloseEvent* event)
{
    QSettings settings;
    settings.setValue(QStringLiteral("window/geometry"), saveGeometry());
    settings.setValue(QStringLiteral("window/state"), saveState());
    settings.setValue(QStringLiteral("window/page"), static_cast<int>(currentPage()));
    event->accept();
}

}  // namespace vireo::ui
