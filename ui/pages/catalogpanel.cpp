#include "ui/pages/catalogpanel.h"

#include "core/hub/cachemanager.h"
#include "core/hub/downloadmanager.h"
#include "inference/util/format.h"
#include "ui/pages/pagehelpers.h"

#include <QFont>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSplitter>
#include <QMessageBox>
#include <QTreeWidget>
#include <QVBoxLayout>

namespace vireo::ui {

namespace {

enum Column { Name, Precision, Size, InCache, Status };
constexpr int kIdRole = Qt::UserRole + 1;

QString bytesText(std::uint64_t bytes)
{
    return QString::fromStdString(vireo::humanBytes(bytes));
}

QLabel* sectionTitle(const QString& text)
{
    auto* label = new QLabel(text);
    label->setObjectName(QStringLiteral("sectionTitle"));
    return label;
}

}  // namespace

CatalogPanel::CatalogPanel(hub::DownloadManager* manager, QWidget* parent)
    : QWidget(parent), m_manager(manager), m_tree(new QTreeWidget), m_details(new QLabel), m_plan(new QPushButton(tr("Plan download…"))),
      m_repo(new QLineEdit), m_repoButton(new QPushButton(tr("Check repo"))), m_repoError(new QLabel), m_cache(new QTreeWidget),
      m_deleteVariant(new QPushButton(tr("Delete from disk…"))), m_deleteRepo(new QPushButton(tr("Delete…"))),
      m_cleanUp(new QPushButton(tr("Clean up…")))
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 12, 0, 0);

    m_tree->setObjectName(QStringLiteral("catalogTree"));
    m_tree->setColumnCount(5);
    m_tree->setHeaderLabels({tr("Model"), tr("Precision"), tr("Download"), tr("In cache"), tr("Status")});
    m_tree->headerItem()->setToolTip(Size, tr("What the download will cost: exact once planned from the Hub, approximate (~) before"));
    m_tree->headerItem()->setToolTip(InCache, tr("Bytes of this model already in the Hugging Face cache, from any tool"));
    m_tree->header()->setStretchLastSection(false);
    m_tree->header()->setSectionResizeMode(Name, QHeaderView::Stretch);
    for (int c = Precision; c <= Status; ++c)
        m_tree->header()->setSectionResizeMode(c, QHeaderView::ResizeToContents);
    m_tree->setAlternatingRowColors(true);
    m_tree->setTextElideMode(Qt::ElideMiddle);
    m_tree->setUniformRowHeights(true);

    m_details->setObjectName(QStringLiteral("pageSubtitle"));
    m_details->setWordWrap(true);
    m_details->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_plan->setObjectName(QStringLiteral("primary"));
    m_plan->setToolTip(tr("Ask the Hub which files this variant needs, what they cost and whether they fit (nothing is downloaded yet)"));
    m_plan->setEnabled(false);
    auto* detailRow = new QHBoxLayout;
    detailRow->addWidget(m_details, 1);
    detailRow->addWidget(m_deleteVariant, 0, Qt::AlignTop);
    detailRow->addWidget(m_plan, 0, Qt::AlignTop);
    m_deleteVariant->setObjectName(QStringLiteral("deleteVariant"));
    m_deleteVariant->setToolTip(tr("Remove this variant's files from the cache; files another installed model uses stay"));
    m_deleteVariant->hide();

    auto* top = new QWidget;
    auto* topLayout = new QVBoxLayout(top);
    topLayout->setContentsMargins(0, 0, 0, 0);
    topLayout->addWidget(m_tree, 1);
    topLayout->addLayout(detailRow);

    m_repo->setObjectName(QStringLiteral("repoEdit"));
    m_repo->setAccessibleName(tr("Hugging Face repo id"));
    m_repo->setPlaceholderText(tr("Any Hugging Face repo, e.g. Lightricks/LTX-2.3"));
    m_repo->setClearButtonEnabled(true);
    m_repoButton->setToolTip(
        tr("List the repo's files and plan what a download would fetch; repos outside the catalog's publishers need your approval"));
    m_repoError->setObjectName(QStringLiteral("errorText"));
    m_repoError->setWordWrap(true);
    m_repoError->hide();
    auto* repoRow = new QHBoxLayout;
    repoRow->addWidget(m_repo, 1);
    repoRow->addWidget(m_repoButton);

    m_cache->setObjectName(QStringLiteral("cacheList"));
    m_cache->setColumnCount(4);
    m_cache->setHeaderLabels({tr("Repo"), tr("Size on disk"), tr("Snapshots"), tr("Used by")});
    m_cache->header()->setSectionResizeMode(0, QHeaderView::Stretch);
    m_cache->setRootIsDecorated(false);
    m_cache->setToolTip(tr("Everything in the Hugging Face cache, including models other tools downloaded"));
    auto* refreshCache = new QPushButton(tr("Refresh"));
    auto* cacheTitle = new QHBoxLayout;
    cacheTitle->addWidget(sectionTitle(tr("In your Hugging Face cache")), 1);
    cacheTitle->addWidget(m_deleteRepo);
    cacheTitle->addWidget(m_cleanUp);
    cacheTitle->addWidget(refreshCache);
    m_deleteRepo->setObjectName(QStringLiteral("deleteRepo"));
    m_cleanUp->setObjectName(QStringLiteral("cleanUp"));
    m_cleanUp->setToolTip(tr("Remove partial downloads no task would resume and files that failed verification"));
    m_deleteRepo->hide();
    m_cleanUp->hide();

    auto* bottom = new QWidget;
    auto* bottomLayout = new QVBoxLayout(bottom);
    bottomLayout->setContentsMargins(0, 0, 0, 0);
    bottomLayout->addWidget(sectionTitle(tr("From the Hub")));
    bottomLayout->addLayout(repoRow);
    bottomLayout->addWidget(m_repoError);
    bottomLayout->addLayout(cacheTitle);
    bottomLayout->addWidget(m_cache, 1);

    auto* split = new QSplitter(Qt::Vertical);
    split->addWidget(top);
    split->addWidget(bottom);
    split->setStretchFactor(0, 5);
    split->setStretchFactor(1, 2);
    split->setSizes({520, 220});
    layout->addWidget(split, 1);

    for (const auto& family : m_manager->catalog().families) {
        auto* f = new QTreeWidgetItem(m_tree, {QString::fromStdString(family.name)});
        QFont bold = f->font(Name);
        bold.setBold(true);
        f->setFont(Name, bold);
        f->setToolTip(Name, QString::fromStdString(family.description));
        f->setFlags(Qt::ItemIsEnabled);
        for (const auto& v : family.variants) {
            auto* item = new QTreeWidgetItem(f, {QString::fromStdString(v.name), QString::fromStdString(v.precision)});
            item->setData(Name, kIdRole, QString::fromStdString(family.id + "/" + v.id));
        }
        f->setExpanded(true);
    }

    connect(m_tree, &QTreeWidget::currentItemChanged, this, &CatalogPanel::updateDetails);
    connect(m_tree, &QTreeWidget::itemDoubleClicked, this, [this](QTreeWidgetItem* item) {
        if (item && item->data(Name, kIdRole).isValid())
            planVariant(item->data(Name, kIdRole).toString());
    });
    connect(m_plan, &QPushButton::clicked, this, [this]() {
        if (auto* item = m_tree->currentItem(); item && item->data(Name, kIdRole).isValid())
            planVariant(item->data(Name, kIdRole).toString());
    });
    connect(m_repoButton, &QPushButton::clicked, this, [this]() { planRepo(m_repo->text()); });
    connect(m_repo, &QLineEdit::returnPressed, this, [this]() { planRepo(m_repo->text()); });
    connect(refreshCache, &QPushButton::clicked, this, &CatalogPanel::refresh);
    connect(m_manager, &hub::DownloadManager::availabilityChanged, this, &CatalogPanel::refresh);
    connect(m_manager, &hub::DownloadManager::taskAdded, this,
        [this](hub::DownloadTask* task) { connect(task, &hub::DownloadTask::planned, this, &CatalogPanel::refresh); });
    for (auto* task : m_manager->tasks())
        connect(task, &hub::DownloadTask::planned, this, &CatalogPanel::refresh);
    refresh();
}

QTreeWidgetItem* CatalogPanel::variantItem(const QString& id) const
{
    for (int i = 0; i < m_tree->topLevelItemCount(); ++i) {
        auto* f = m_tree->topLevelItem(i);
        for (int j = 0; j < f->childCount(); ++j)
            if (f->child(j)->data(Name, kIdRole).toString() == id)
                return f->child(j);
    }
    return nullptr;
}

void CatalogPanel::refresh()
{
    for (int i = 0; i < m_tree->topLevelItemCount(); ++i) {
        auto* f = m_tree->topLevelItem(i);
        for (int j = 0; j < f->childCount(); ++j) {
            auto* item = f->child(j);
            const auto id = item->data(Name, kIdRole).toString();
            const auto* variant = m_manager->catalog().find(id.toStdString());
            const auto* task = m_manager->task(QStringLiteral("catalog:") + id);
            if (task && !task->plans().empty()) {
                const auto t = task->totals();
                item->setText(Size, bytesText(t.totalBytes));
                item->setToolTip(
                    Size, tr("%1 in %2, as planned from the Hub").arg(bytesText(t.totalBytes), countOf(t.files, tr("file"), tr("files"))));
                item->setText(InCache, bytesText(t.presentBytes));
                item->setToolTip(InCache,
                    tr("%1 of %2 already in the cache (complete files and resumable partial downloads)")
                        .arg(bytesText(t.presentBytes), bytesText(t.totalBytes)));
            } else {
                // A variant without an estimate says how to learn its size instead of a blank.
                const bool estimated = variant && variant->approxDownloadBytes;
                item->setText(Size, estimated ? QStringLiteral("~") + bytesText(*variant->approxDownloadBytes) : tr("plan to see"));
                item->setToolTip(Size,
                    estimated ? tr("Approximate; plan the download for the exact size")
                              : tr("No estimate in the catalog: Plan reads the exact size from the Hub before anything downloads"));
                item->setText(InCache, QString());
            }
            using A = hub::DownloadManager::Availability;
            switch (m_manager->availability(id)) {
            case A::Ready:
                item->setText(Status, tr("Ready"));
                item->setForeground(Status, QColor(0x3d, 0xa8, 0x7a));
                item->setToolTip(Status, tr("Every file this variant needs is in the cache"));
                break;
            case A::Partial:
                item->setText(Status, tr("Partly downloaded"));
                item->setForeground(Status, QColor(0xe0, 0xb0, 0x50));
                item->setToolTip(Status, tr("Some files are in the cache; a download resumes from them"));
                break;
            case A::InCache:
                item->setText(Status, tr("Files in cache"));
                item->setForeground(Status, QColor(0xb8, 0xbe, 0xc6));
                item->setToolTip(Status, tr("Its repos are in the cache; plan the download to see what is missing"));
                break;
            case A::NotDownloaded:
                item->setText(Status, tr("Not downloaded"));
                item->setForeground(Status, QColor(0x8b, 0x92, 0x9c));
                item->setToolTip(Status, QString());
                break;
            }
        }
    }
    m_cache->clear();
    if (m_cacheManager) {
        for (const auto& r : m_cacheManager->repos()) {
            auto* item = new QTreeWidgetItem(m_cache,
                {r.repo, bytesText(static_cast<quint64>(r.bytes)), QString::number(r.snapshots), r.variants.join(QStringLiteral(", "))});
            item->setToolTip(0, m_manager->isTrusted(r.repo.toStdString()) ? tr("Trusted publisher") : tr("Not a catalog publisher"));
        }
    } else {
        for (const auto& r : m_manager->scanCache()) {
            auto* item = new QTreeWidgetItem(m_cache, {r.repo, bytesText(r.bytes), QString::number(r.snapshots)});
            item->setToolTip(0, m_manager->isTrusted(r.repo.toStdString()) ? tr("Trusted publisher") : tr("Not a catalog publisher"));
        }
    }
    updateDetails();
}

void CatalogPanel::updateDetails()
{
    auto* item = m_tree->currentItem();
    const auto id = item ? item->data(Name, kIdRole).toString() : QString();
    const auto* variant = id.isEmpty() ? nullptr : m_manager->catalog().find(id.toStdString());
    m_plan->setEnabled(variant != nullptr);
    m_deleteVariant->setVisible(m_cacheManager && variant && m_manager->readyFiles(QStringLiteral("catalog:") + id).has_value());
    if (!variant) {
        m_details->setText(tr("Pick a variant to see what it needs. bf16 is full precision; FP8 and GGUF need less memory and disk."));
        return;
    }
    QStringList sources;
    for (const auto& s : variant->sources)
        sources << tr("%1 (%2)").arg(QString::fromStdString(s.repo), QString::fromStdString(s.role));
    m_details->setText(
        tr("<b>%1</b> · %2 · pipeline %3<br>Reads from: %4")
            .arg(QString::fromStdString(variant->name).toHtmlEscaped(), QString::fromStdString(variant->precision).toHtmlEscaped(),
                QString::fromStdString(variant->pipeline).toHtmlEscaped(), sources.join(QStringLiteral(", ")).toHtmlEscaped()));
}

void CatalogPanel::planVariant(const QString& id)
{
    if (auto* item = variantItem(id))
        m_tree->setCurrentItem(item);
    QString error;
    if (auto* task = m_manager->openVariant(id, &error))
        emit taskOpened(task->spec().key);
}

void CatalogPanel::planRepo(const QString& repo)
{
    QString error;
    auto* task = m_manager->openRepo(repo, &error);
    m_repoError->setVisible(!task);
    m_repoError->setText(error);
    if (task)
        emit taskOpened(task->spec().key);
}

void CatalogPanel::setCacheManager(hub::CacheManager* cache)
{
    m_cacheManager = cache;
    m_deleteRepo->setVisible(cache != nullptr);
    m_cleanUp->setVisible(cache != nullptr);
    connect(m_deleteVariant, &QPushButton::clicked, this, [this] { deleteSelectedVariant(); });
    connect(m_deleteRepo, &QPushButton::clicked, this, [this] { deleteSelectedRepo(); });
    connect(m_cleanUp, &QPushButton::clicked, this, [this] { cleanUp(); });
    connect(m_cache, &QTreeWidget::currentItemChanged, this, [this](QTreeWidgetItem* item) { m_deleteRepo->setEnabled(item != nullptr); });
    m_deleteRepo->setEnabled(false);
    refresh();
}

qint64 CatalogPanel::runCachePlan(const hub::CachePlan& plan, bool confirm)
{
    if (!plan.blockers.isEmpty()) {
        if (confirm)
            QMessageBox::information(this, tr("Not now"), plan.blockers.join(QLatin1Char('\n')));
        return -1;
    }
    if (plan.empty()) {
        if (confirm)
            QMessageBox::information(this, tr("Nothing to do"), tr("%1: nothing to remove.").arg(plan.what));
        return 0;
    }
    if (confirm) {
        QMessageBox box(QMessageBox::Question, tr("Delete from disk"),
            tr("Delete %1? This frees %2 (%3 entries).")
                .arg(plan.what, bytesText(static_cast<quint64>(plan.freedBytes)))
                .arg(plan.remove.size()),
            QMessageBox::Yes | QMessageBox::Cancel, this);
        QStringList details;
        if (!plan.kept.isEmpty())
            details << tr("Notes:") << plan.kept.mid(0, 40);
        details << tr("Removed:") << plan.remove.mid(0, 60);
        box.setDetailedText(details.join(QLatin1Char('\n')));
        if (box.exec() != QMessageBox::Yes)
            return -1;
    }
    QString error;
    const auto freed = m_cacheManager->execute(plan, &error);
    if (freed < 0 && confirm)
        QMessageBox::warning(this, tr("Delete from disk"), error);
    refresh();
    return freed;
}

void CatalogPanel::deleteSelectedVariant(bool confirm)
{
    auto* item = m_tree->currentItem();
    const auto id = item ? item->data(Name, kIdRole).toString() : QString();
    if (m_cacheManager && !id.isEmpty())
        runCachePlan(m_cacheManager->planDeleteVariant(id), confirm);
}

void CatalogPanel::deleteSelectedRepo(bool confirm)
{
    if (m_cacheManager && m_cache->currentItem())
        runCachePlan(m_cacheManager->planDeleteRepo(m_cache->currentItem()->text(0)), confirm);
}

void CatalogPanel::cleanUp(bool confirm)
{
    if (m_cacheManager)
        runCachePlan(m_cacheManager->planCleanup(), confirm);
}

}  // namespace vireo::ui
