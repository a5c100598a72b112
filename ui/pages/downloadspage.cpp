#include "ui/pages/downloadspage.h"

#include "core/hub/downloadmanager.h"
#include "core/settings/studiosettings.h"
#include "inference/util/format.h"
#include "ui/dialogs/trustdialog.h"
#include "ui/pages/pagehelpers.h"

#include <QFrame>
#include <QHBoxLayout>
#include <QHash>
#include <QHeaderView>
#include <QLabel>
#include <QListWidget>
#include <QProgressBar>
#include <QPushButton>
#include <QSplitter>
#include <QStackedWidget>
#include <QTreeWidget>
#include <QVBoxLayout>

namespace vireo::ui {

namespace {

using hub::DownloadTask;
using hub::FileState;
using State = hub::DownloadTask::State;

enum Column { File, Size, Progress, Speed, Eta, StateColumn, Action };

QString bytesText(std::uint64_t bytes)
{
    return QString::fromStdString(vireo::humanBytes(bytes));
}

QString speedText(double bytesPerSecond)
{
    return bytesPerSecond > 0 ? bytesText(static_cast<std::uint64_t>(bytesPerSecond)) + QStringLiteral("/s") : QString();
}

QString etaText(double seconds)
{
    if (seconds < 0)
        return QString();
    const auto s = static_cast<qint64>(seconds + 0.5);
    if (s < 60)
        return QObject::tr("%1 s").arg(s);
    if (s < 3600)
        return QObject::tr("%1 min %2 s").arg(s / 60).arg(s % 60);
    return QObject::tr("%1 h %2 min").arg(s / 3600).arg((s % 3600) / 60);
}

QString stateText(const hub::FileStatus& st)
{
    switch (st.state) {
    case FileState::Queued: return QObject::tr("Queued");
    case FileState::Downloading: return QObject::tr("Downloading");
    case FileState::Retrying: return QObject::tr("Stalled, retrying (%1/%2)").arg(st.attempt).arg(st.maxAttempts);
    case FileState::Verifying: return QObject::tr("Verifying");
    case FileState::Done: return QObject::tr("Done");
    case FileState::Failed: return QObject::tr("Failed");
    case FileState::Cancelled: return QObject::tr("Cancelled");
    }
    return {};
}

QString taskStateText(const DownloadTask& task)
{
    switch (task.state()) {
    case State::Idle: return QObject::tr("Waiting");
    case State::Planning: return QObject::tr("Planning…");
    case State::PlanFailed: return QObject::tr("Plan failed");
    case State::Planned: return task.totals().presentBytes > 0 ? QObject::tr("Ready to resume") : QObject::tr("Ready to start");
    case State::Downloading: {
        const auto t = task.totals();
        const int percent =
            t.totalBytes ? static_cast<int>(100.0 * static_cast<double>(t.bytesDone) / static_cast<double>(t.totalBytes)) : 0;
        return QObject::tr("Downloading, %1%").arg(percent);
    }
    case State::Done: return QObject::tr("Ready");
    case State::Failed: return QObject::tr("Failed");
    case State::Cancelled: return QObject::tr("Cancelled (resumable)");
    }
    return {};
}

}  // namespace

DownloadsPage::DownloadsPage(hub::DownloadManager* manager, QWidget* parent)
    : QWidget(parent), m_manager(manager), m_list(new QListWidget), m_stack(new QStackedWidget), m_title(new QLabel), m_sources(new QLabel),
      m_summary(new QLabel), m_reason(new QLabel), m_error(new QLabel), m_total(new QProgressBar), m_totalText(new QLabel),
      m_start(new QPushButton(tr("Start download"))), m_cancelAll(new QPushButton(tr("Cancel all"))),
      m_approve(new QPushButton(tr("Review and approve…"))), m_remove(new QPushButton(tr("Remove from list"))), m_files(new QTreeWidget)
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(28, 24, 28, 24);
    addPageHeader(layout, tr("Downloads"),
        tr("Each model's plan before a byte moves, then its files as they arrive. Downloads go to the Hugging Face cache, "
           "resume where they stopped and are verified by SHA-256."));

    m_list->setObjectName(QStringLiteral("downloadList"));
    m_list->setMinimumWidth(220);
    m_list->setMaximumWidth(320);

    auto* detail = new QWidget;
    auto* d = new QVBoxLayout(detail);
    d->setContentsMargins(16, 0, 0, 0);
    m_title->setObjectName(QStringLiteral("sectionTitle"));
    m_sources->setObjectName(QStringLiteral("pageSubtitle"));
    m_sources->setWordWrap(true);
    d->addWidget(m_title);
    d->addWidget(m_sources);

    auto* card = new QFrame;
    card->setObjectName(QStringLiteral("card"));
    auto* c = new QVBoxLayout(card);
    c->setContentsMargins(16, 12, 16, 12);
    m_summary->setObjectName(QStringLiteral("planSummary"));
    m_summary->setWordWrap(true);
    m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
    c->addWidget(m_summary);
    m_reason->setObjectName(QStringLiteral("blockReason"));
    m_reason->setWordWrap(true);
    c->addWidget(m_reason);
    m_error->setObjectName(QStringLiteral("errorText"));
    m_error->setWordWrap(true);
    m_error->setTextInteractionFlags(Qt::TextSelectableByMouse);
    c->addWidget(m_error);
    auto* buttons = new QHBoxLayout;
    m_start->setObjectName(QStringLiteral("primary"));
    m_start->setToolTip(tr("Download the missing files; partial files resume and verified files are not fetched again"));
    m_cancelAll->setToolTip(tr("Stop every file; what was downloaded is kept for resuming"));
    m_approve->setToolTip(tr("This repo is not from a catalog publisher: review what it contains and decide"));
    m_remove->setToolTip(tr("Forget this entry (files already in the cache stay there)"));
    buttons->addWidget(m_start);
    buttons->addWidget(m_cancelAll);
    buttons->addWidget(m_approve);
    buttons->addStretch(1);
    buttons->addWidget(m_remove);
    c->addLayout(buttons);
    d->addWidget(card);

    m_total->setObjectName(QStringLiteral("totalProgress"));
    m_total->setRange(0, 1000);
    m_total->setTextVisible(false);
    m_total->setFixedHeight(10);
    m_totalText->setObjectName(QStringLiteral("pageSubtitle"));
    d->addWidget(m_total);
    d->addWidget(m_totalText);

    m_files->setObjectName(QStringLiteral("fileTable"));
    m_files->setColumnCount(7);
    m_files->setHeaderLabels({tr("File"), tr("Size"), tr("Progress"), tr("Speed"), tr("ETA"), tr("State"), QString()});
    m_files->headerItem()->setToolTip(Size, tr("The file's size on the Hub"));
    m_files->headerItem()->setToolTip(Eta, tr("Estimated time left at the current speed"));
    m_files->setRootIsDecorated(false);
    m_files->setUniformRowHeights(true);
    m_files->setAlternatingRowColors(true);
    m_files->setTextElideMode(Qt::ElideMiddle);
    m_files->header()->setStretchLastSection(false);
    m_files->header()->setSectionResizeMode(File, QHeaderView::Stretch);
    m_files->header()->setSectionResizeMode(Progress, QHeaderView::Fixed);
    m_files->header()->resizeSection(Progress, 160);
    for (int col : {Size, Speed, Eta, StateColumn})
        m_files->header()->setSectionResizeMode(col, QHeaderView::ResizeToContents);
    // Buttons live in the column as widgets, which ResizeToContents does not measure.
    m_files->header()->setSectionResizeMode(Action, QHeaderView::Fixed);
    m_files->header()->resizeSection(Action, 84);
    d->addWidget(m_files, 1);

    auto* empty = makeEmptyState(tr("Nothing planned yet"),
        tr("Pick a model in Models (catalog variant, any Hub repo) and choose \"Plan download\". Its files, sizes and "
           "the space it needs appear here before anything is downloaded."));
    m_stack->addWidget(empty);
    m_stack->addWidget(detail);

    auto* split = new QSplitter;
    split->addWidget(m_list);
    split->addWidget(m_stack);
    split->setStretchFactor(1, 1);
    layout->addWidget(split, 1);

    connect(m_list, &QListWidget::currentRowChanged, this, [this](int row) {
        if (row >= 0 && row < m_manager->tasks().size())
            bindTask(m_manager->tasks().at(row));
    });
    connect(m_start, &QPushButton::clicked, this, [this]() {
        if (!m_task)
            return;
        if (m_task->state() == State::PlanFailed || m_task->state() == State::Idle)
            m_task->plan();
        else
            m_task->start();
    });
    connect(m_cancelAll, &QPushButton::clicked, this, [this]() {
        if (m_task)
            m_task->cancelAll();
    });
    connect(m_approve, &QPushButton::clicked, this, &DownloadsPage::requestApproval);
    connect(m_remove, &QPushButton::clicked, this, [this]() {
        if (m_task && !m_task->busy())
            m_manager->removeTask(m_task->spec().key);
    });
    connect(m_manager, &hub::DownloadManager::taskAdded, this, &DownloadsPage::addTaskItem);
    connect(m_manager, &hub::DownloadManager::taskRemoved, this, [this](const QString&) {
        m_list->clear();
        for (auto* t : m_manager->tasks())
            addTaskItem(t);
        if (m_manager->tasks().isEmpty()) {
            m_task = nullptr;
            m_stack->setCurrentIndex(0);
        } else {
            m_list->setCurrentRow(0);
        }
    });
    connect(m_manager->settings(), &core::StudioSettings::changed, this, &DownloadsPage::updateControls);
    for (auto* t : m_manager->tasks())
        addTaskItem(t);
    if (!m_manager->tasks().isEmpty())
        m_list->setCurrentRow(0);
}

DownloadTask* DownloadsPage::currentTask() const
{
    return m_task.data();
}

void DownloadsPage::addTaskItem(DownloadTask* task)
{
    auto* item = new QListWidgetItem(m_list);
    item->setData(Qt::UserRole, task->spec().key);
    updateTaskItem(task);
    // The list is the context so binding another task (which disconnects this page) keeps these.
    connect(task, &DownloadTask::stateChanged, m_list, [this, task]() { updateTaskItem(task); });
    connect(task, &DownloadTask::totalsChanged, m_list, [this, task]() { updateTaskItem(task); });
}

void DownloadsPage::updateTaskItem(DownloadTask* task)
{
    for (int i = 0; i < m_list->count(); ++i) {
        auto* item = m_list->item(i);
        if (item->data(Qt::UserRole).toString() != task->spec().key)
            continue;
        const QString text = task->spec().title + QLatin1Char('\n') + taskStateText(*task);
        if (item->text() != text)
            item->setText(text);
    }
}

void DownloadsPage::showTask(const QString& key)
{
    for (int i = 0; i < m_list->count(); ++i)
        if (m_list->item(i)->data(Qt::UserRole).toString() == key) {
            m_list->setCurrentRow(i);
            if (auto* t = m_manager->task(key); t && t != m_task)
                bindTask(t);
            return;
        }
}

void DownloadsPage::bindTask(DownloadTask* task)
{
    if (m_task)
        disconnect(m_task, nullptr, this, nullptr);
    m_task = task;
    m_stack->setCurrentIndex(1);
    m_title->setText(task->spec().title);
    // Each repo once, with the parts it gives: a GGUF variant takes four files from one repo.
    QStringList repos;
    QHash<QString, QStringList> roles;
    for (const auto& s : task->spec().sources) {
        const auto repo = QStringLiteral("%1 @ %2").arg(QString::fromStdString(s.repo), QString::fromStdString(s.revision));
        if (!repos.contains(repo))
            repos << repo;
        const auto role = QString::fromStdString(s.role).replace(QLatin1Char('_'), QLatin1Char(' '));
        if (!role.isEmpty() && !roles[repo].contains(role))
            roles[repo] << role;
    }
    QStringList sources;
    for (const auto& repo : repos)
        sources << (roles[repo].isEmpty() ? repo : QStringLiteral("%1 (%2)").arg(repo, roles[repo].join(QStringLiteral(", "))));
    m_sources->setText(tr("From %1").arg(sources.join(QStringLiteral("; "))));
    connect(task, &DownloadTask::planned, this, &DownloadsPage::rebuildRows);
    connect(task, &DownloadTask::stateChanged, this, &DownloadsPage::updateControls);
    connect(task, &DownloadTask::rowChanged, this, &DownloadsPage::updateRow);
    connect(task, &DownloadTask::totalsChanged, this, &DownloadsPage::updateTotals);
    rebuildRows();
}

void DownloadsPage::rebuildRows()
{
    m_files->clear();
    m_lastPercent.clear();
    if (!m_task)
        return;
    const auto& rows = m_task->rows();
    m_lastPercent.assign(rows.size(), 0);
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const auto& r = rows[i];
        auto* item = new QTreeWidgetItem(m_files);
        const bool multi = m_task->plans().size() > 1;
        item->setText(File, QString::fromStdString(r.file.path));
        item->setToolTip(File,
            QString::fromStdString(m_task->plans()[static_cast<std::size_t>(r.source)].repo + ": " + r.file.path)
                + (r.file.lfs() ? tr("\nSHA-256 %1").arg(QString::fromStdString(r.file.sha256)) : QString()));
        if (multi)
            item->setText(File,
                QString::fromStdString(m_task->spec().sources[static_cast<std::size_t>(r.source)].role).isEmpty()
                    ? QString::fromStdString(r.file.path)
                    : QStringLiteral("[%1] %2").arg(QString::fromStdString(m_task->spec().sources[static_cast<std::size_t>(r.source)].role),
                        QString::fromStdString(r.file.path)));
        item->setText(Size, bytesText(r.file.size));
        item->setToolTip(Size, tr("%1 bytes").arg(r.file.size));
        auto* bar = new QProgressBar;
        bar->setRange(0, 1000);
        bar->setTextVisible(true);
        bar->setFormat(QStringLiteral("%p%"));
        m_files->setItemWidget(item, Progress, bar);
        auto* action = new QPushButton;
        action->setFlat(true);
        const int row = static_cast<int>(i);
        connect(action, &QPushButton::clicked, this, [this, row]() {
            if (!m_task || row >= static_cast<int>(m_task->rows().size()))
                return;
            const auto state = m_task->rows()[static_cast<std::size_t>(row)].status.state;
            if (state == FileState::Failed || state == FileState::Cancelled)
                m_task->start(row);  // repair / resume this file; the others keep their state
            else
                m_task->cancelFile(row);
        });
        m_files->setItemWidget(item, Action, action);
        updateRow(row);
    }
    updateControls();
    updateTotals();
}

QPushButton* DownloadsPage::rowAction(int row) const
{
    auto* item = m_files->topLevelItem(row);
    return item ? qobject_cast<QPushButton*>(m_files->itemWidget(item, Action)) : nullptr;
}

QProgressBar* DownloadsPage::rowProgress(int row) const
{
    auto* item = m_files->topLevelItem(row);
    return item ? qobject_cast<QProgressBar*>(m_files->itemWidget(item, Progress)) : nullptr;
}

void DownloadsPage::updateRow(int row)
{
    if (!m_task || row < 0 || row >= static_cast<int>(m_task->rows().size()) || row >= m_files->topLevelItemCount())
        return;
    const auto& r = m_task->rows()[static_cast<std::size_t>(row)];
    auto* item = m_files->topLevelItem(row);
    const auto done = std::min(r.status.bytesDone, r.file.size);
    int permille = r.file.size ? static_cast<int>(1000.0 * static_cast<double>(done) / static_cast<double>(r.file.size)) : 1000;
    if (r.status.state == FileState::Done)
        permille = 1000;
    permille = std::clamp(permille, 0, 1000);
    if (auto* bar = rowProgress(row)) {
        bar->setValue(permille);
        bar->setToolTip(tr("%1 of %2").arg(bytesText(done), bytesText(r.file.size)));
    }
    const bool active = r.status.state == FileState::Downloading;
    item->setText(Speed, active ? speedText(r.status.bytesPerSecond) : QString());
    item->setText(Eta, active ? etaText(r.status.etaSeconds) : QString());
    item->setText(StateColumn, stateText(r.status));
    item->setToolTip(StateColumn, QString::fromStdString(r.status.message));
    QColor color = palette().color(QPalette::Text);
    if (r.status.state == FileState::Failed)
        color = QColor(0xff, 0x80, 0x80);
    else if (r.status.state == FileState::Done)
        color = QColor(0x3d, 0xa8, 0x7a);
    else if (r.status.state == FileState::Retrying)
        color = QColor(0xe0, 0xb0, 0x50);
    item->setForeground(StateColumn, color);
    if (auto* action = rowAction(row)) {
        const bool downloading = m_task->state() == State::Downloading;
        switch (r.status.state) {
        case FileState::Done:
            action->setText(QString());
            action->setEnabled(false);
            break;
        case FileState::Failed:
            action->setText(tr("Repair"));
            action->setToolTip(tr("Fetch this file again: %1").arg(QString::fromStdString(r.status.message)));
            action->setEnabled(!downloading);
            break;
        case FileState::Cancelled:
            action->setText(tr("Resume"));
            action->setToolTip(tr("Continue from the bytes already downloaded"));
            action->setEnabled(!downloading);
            break;
        default:
            action->setText(tr("Cancel"));
            action->setToolTip(tr("Stop this file; its bytes are kept for resuming"));
            action->setEnabled(true);
        }
    }
}

void DownloadsPage::updateTotals()
{
    if (!m_task)
        return;
    const auto t = m_task->totals();
    const int permille = t.totalBytes ? static_cast<int>(1000.0 * static_cast<double>(t.bytesDone) / static_cast<double>(t.totalBytes)) : 0;
    // The bar never moves backwards while a run is going.
    if (m_task->state() != State::Downloading || permille >= m_total->value())
        m_total->setValue(std::clamp(permille, 0, 1000));
    QString text = tr("%1 of %2").arg(bytesText(t.bytesDone), bytesText(t.totalBytes));
    if (m_task->state() == State::Downloading && t.bytesPerSecond > 0)
        text += tr(" · %1 · %2 left").arg(speedText(t.bytesPerSecond), etaText(t.etaSeconds));
    text += tr(" · %1 of %2 done").arg(t.filesDone).arg(countOf(t.files, tr("file"), tr("files")));
    if (t.filesFailed)
        text += tr(", %1 failed").arg(t.filesFailed);
    m_totalText->setText(text);
    m_total->setToolTip(text);
}

void DownloadsPage::updateControls()
{
    if (!m_task)
        return;
    const auto state = m_task->state();
    const auto t = m_task->totals();
    const auto& pf = m_task->preflight();
    const bool planned = !m_task->plans().empty();
    QStringList untrusted;
    for (const auto& s : m_task->spec().sources)
        if (!m_manager->isTrusted(s.repo))
            untrusted << QString::fromStdString(s.repo);
    untrusted.removeDuplicates();

    if (planned) {
        m_summary->setText(
            tr("<b>%7</b>, %1 in total · %2 already in the cache · <b>%3 to download</b><br>"
               "Free on %4: %5 (keeping %6 spare)")
                .arg(bytesText(t.totalBytes), bytesText(t.presentBytes), bytesText(t.totalBytes - std::min(t.presentBytes, t.totalBytes)),
                    QString::fromStdString(pf.volume).toHtmlEscaped(), bytesText(pf.freeBytes),
                    bytesText(m_manager->settings()->headroomBytes()), countOf(t.files, tr("file"), tr("files"))));
        m_summary->setToolTip(tr("Needed: the remaining bytes plus a safety margin, %1 in all").arg(bytesText(pf.neededBytes)));
    } else {
        m_summary->setText(state == State::Planning ? tr("Asking the Hub which files this model needs…") : QString());
    }

    QString reason;
    bool canStart = false;
    if (state == State::Planning)
        reason = tr("Planning…");
    else if (state == State::PlanFailed)
        reason.clear();
    else if (state == State::Downloading)
        reason.clear();
    else if (state == State::Done)
        reason = tr("Every file is in the cache and verified: the model is ready.");
    else if (!untrusted.isEmpty())
        reason =
            tr("%1 is not from a catalog publisher: review and approve it before downloading.").arg(untrusted.join(QStringLiteral(", ")));
    else if (m_manager->settings()->offline())
        reason = tr("Offline mode is on (Settings): nothing can be downloaded.");
    else if (planned && !pf.fits)
        reason = tr("Does not fit: %1").arg(QString::fromStdString(pf.message));
    else if (planned)
        canStart = true;

    m_error->setVisible(state == State::PlanFailed || state == State::Failed);
    m_error->setText(m_task->message());
    m_reason->setText(reason);
    m_reason->setVisible(!reason.isEmpty());
    m_start->setEnabled(canStart || state == State::PlanFailed);
    m_start->setText(state == State::PlanFailed                                           ? tr("Try again")
            : (state == State::Failed || state == State::Cancelled || t.presentBytes > 0) ? tr("Resume download")
                                                                                          : tr("Start download"));
    m_start->setToolTip(
        canStart ? tr("Download %1; partial files resume").arg(bytesText(t.totalBytes - std::min(t.totalBytes, t.bytesDone))) : reason);
    m_cancelAll->setEnabled(state == State::Downloading);
    m_approve->setVisible(!untrusted.isEmpty() && planned);
    m_remove->setEnabled(!m_task->busy());
    for (int i = 0; i < m_files->topLevelItemCount(); ++i)
        updateRow(i);
    updateTotals();
}

void DownloadsPage::requestApproval()
{
    if (!m_task)
        return;
    QStringList untrusted;
    for (const auto& s : m_task->spec().sources)
        if (!m_manager->isTrusted(s.repo))
            untrusted << QString::fromStdString(s.repo);
    untrusted.removeDuplicates();
    if (untrusted.isEmpty())
        return;
    auto* dialog = new TrustDialog(*m_task, untrusted, this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    connect(dialog, &QDialog::accepted, this, [this, untrusted]() {
        for (const auto& r : untrusted)
            m_manager->settings()->trustRepo(r);
        updateControls();
    });
    dialog->open();
}

}  // namespace vireo::ui
