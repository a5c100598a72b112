#pragma once

#include <QWidget>

class QLabel;
class QLineEdit;
class QPushButton;
class QTreeWidget;
class QTreeWidgetItem;

namespace vireo::hub {
class CacheManager;
class DownloadManager;
class DownloadTask;
struct CachePlan;
}  // namespace vireo::hub

namespace vireo::ui {

// The catalog (families and their variants with size, cache presence and readiness), a
// field for any Hub repo, and the models already in the huggingface_hub cache.
class CatalogPanel : public QWidget {
    Q_OBJECT
public:
    explicit CatalogPanel(hub::DownloadManager* manager, QWidget* parent = nullptr);

    QTreeWidget* catalogTree() const { return m_tree; }
    QTreeWidget* cacheList() const { return m_cache; }
    QLineEdit* repoEdit() const { return m_repo; }
    QLabel* repoError() const { return m_repoError; }
    // The variant's row ("ltx-2.3/distilled-fp8"), or nullptr.
    QTreeWidgetItem* variantItem(const QString& id) const;
    // Select a variant and press "Plan download".
    void planVariant(const QString& id);
    void planRepo(const QString& repo);
    // Deleting from disk and cleaning up (shown once a cache manager is set).
    void setCacheManager(hub::CacheManager* cache);
    // Shows the plan and runs it when the user confirms (or at once when `confirm` is false,
    // for tests); returns the bytes freed, -1 when nothing ran.
    qint64 runCachePlan(const hub::CachePlan& plan, bool confirm = true);
    void deleteSelectedVariant(bool confirm = true);
    void deleteSelectedRepo(bool confirm = true);
    void cleanUp(bool confirm = true);

signals:
    // A task exists for it now: show its plan.
    void taskOpened(const QString& key);

public slots:
    void refresh();

private:
    void updateDetails();

    hub::DownloadManager* m_manager;
    QTreeWidget* m_tree;
    QLabel* m_details;
    QPushButton* m_plan;
    QLineEdit* m_repo;
    QPushButton* m_repoButton;
    QLabel* m_repoError;
    QTreeWidget* m_cache;
    hub::CacheManager* m_cacheManager = nullptr;
    QPushButton* m_deleteVariant;
    QPushButton* m_deleteRepo;
    QPushButton* m_cleanUp;
};

}  // namespace vireo::ui
