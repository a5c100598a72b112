#pragma once

#include <QWidget>

class QLabel;
class QPushButton;
class QTreeWidget;
class QFrame;

namespace vireo::core {
class LocalModelInspector;
}
namespace vireo::inspect {
struct ModelReport;
}
namespace vireo::hub {
class DownloadManager;
}
class QTabWidget;

namespace vireo::ui {

// Opens a model from disk and shows what it is: family, version, quantization, components,
// files and metadata, read from headers on a worker thread.
class ModelsPage : public QWidget {
    Q_OBJECT
public:
    explicit ModelsPage(hub::DownloadManager* manager, QWidget* parent = nullptr);
    class CatalogPanel* catalogPanel() const { return m_catalog; }
    QTabWidget* tabs() const { return m_tabs; }

    void openPath(const QString& path);
    QTreeWidget* reportView() const { return m_report; }
    QString statusText() const;

public slots:
    void chooseFile();
    void chooseFolder();

signals:
    void inspectionFinished(const QString& path, bool ok);
    // A download task was opened (planned) from the catalog or a Hub repo id.
    void taskOpened(const QString& key);
    // The model opened here is wanted on the Generate page.
    void useRequested(const QString& path);

protected:
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dragLeaveEvent(QDragLeaveEvent* event) override;
    void dropEvent(QDropEvent* event) override;

private:
    void showReport(const QString& path, const vireo::inspect::ModelReport& report);
    void showError(const QString& path, const QString& message);
    void setDragActive(bool active);

    core::LocalModelInspector* m_inspector;
    QTabWidget* m_tabs;
    class CatalogPanel* m_catalog;
    QFrame* m_dropZone;
    QPushButton* m_openFile;
    QPushButton* m_openFolder;
    QLabel* m_status;
    QLabel* m_error;
    QTreeWidget* m_report;
    QPushButton* m_use;
    QString m_reportPath;  // the model the report shows
};

}  // namespace vireo::ui
