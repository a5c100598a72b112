#pragma once

#include <QPointer>
#include <QWidget>

class QLabel;
class QListWidget;
class QProgressBar;
class QPushButton;
class QStackedWidget;
class QTreeWidget;

namespace vireo::hub {
class DownloadManager;
class DownloadTask;
}  // namespace vireo::hub

namespace vireo::ui {

// The plan of a model before a byte moves (files, sizes, what is cached, free space, the
// preflight verdict) and then its download: one row per file with progress, speed, ETA and
// state, cancel per file and for all, resume and repair.
class DownloadsPage : public QWidget {
    Q_OBJECT
public:
    explicit DownloadsPage(hub::DownloadManager* manager, QWidget* parent = nullptr);

    void showTask(const QString& key);
    hub::DownloadTask* currentTask() const;

    QListWidget* taskList() const { return m_list; }
    QTreeWidget* fileTable() const { return m_files; }
    QPushButton* startButton() const { return m_start; }
    QPushButton* cancelAllButton() const { return m_cancelAll; }
    QPushButton* approveButton() const { return m_approve; }
    QLabel* blockReason() const { return m_reason; }
    QLabel* summary() const { return m_summary; }
    QLabel* taskError() const { return m_error; }
    QProgressBar* totalProgress() const { return m_total; }
    // The per-file action button (Cancel / Repair) of a row.
    QPushButton* rowAction(int row) const;
    QProgressBar* rowProgress(int row) const;

    // Opens the approval dialog for the current task's untrusted repos.
    void requestApproval();

private:
    void addTaskItem(hub::DownloadTask* task);
    void updateTaskItem(hub::DownloadTask* task);
    void bindTask(hub::DownloadTask* task);
    void rebuildRows();
    void updateRow(int row);
    void updateControls();
    void updateTotals();

    hub::DownloadManager* m_manager;
    QPointer<hub::DownloadTask> m_task;
    QListWidget* m_list;
    QStackedWidget* m_stack;
    QLabel* m_title;
    QLabel* m_sources;
    QLabel* m_summary;
    QLabel* m_reason;
    QLabel* m_error;
    QProgressBar* m_total;
    QLabel* m_totalText;
    QPushButton* m_start;
    QPushButton* m_cancelAll;
    QPushButton* m_approve;
    QPushButton* m_remove;
    QTreeWidget* m_files;
    std::vector<int> m_lastPercent;
};

}  // namespace vireo::ui
