#pragma once

#include <QMainWindow>

class QListWidget;
class QStackedWidget;

namespace vireo::core {
class Studio;
class StudioSettings;
}  // namespace vireo::core
namespace vireo::hub {
class DownloadManager;
}

namespace vireo::api {
class ApiService;
}

namespace vireo::ui {

class ModelsPage;
class DownloadsPage;
class GeneratePage;
class GalleryPage;
class SettingsPage;

// The studio's frame: a navigation sidebar and one page per area. Remembers its geometry
// and the last page.
class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    enum class Page { Models, Downloads, Generate, Gallery, Settings };

    // The window shows the studio's services; it does not own or build them.
    explicit MainWindow(core::Studio* studio, QWidget* parent = nullptr);

    void showPage(Page page);
    Page currentPage() const;
    ModelsPage* modelsPage() const { return m_models; }
    DownloadsPage* downloadsPage() const { return m_downloads; }
    GeneratePage* generatePage() const { return m_generate; }
    GalleryPage* galleryPage() const { return m_gallery; }
    core::Studio* studio() const { return m_studio; }
    SettingsPage* settingsPage() const { return m_settingsPage; }
    hub::DownloadManager* downloads() const { return m_manager; }
    core::StudioSettings* settings() const { return m_settings; }
    QListWidget* navigation() const { return m_navigation; }
    // The local API serving this studio's engines while Settings says so; nullptr when off.
    api::ApiService* apiService() const { return m_api; }

protected:
    void closeEvent(QCloseEvent* event) override;

private:
    void buildNavigation();
    void connectPages();
    void addHubLora(const QString& repo);
    // Starts, restarts or stops the local API as the settings say.
    void applyApiSettings();
    core::Studio* m_studio;
    QListWidget* m_navigation;
    QStackedWidget* m_pages;
    core::StudioSettings* m_settings;
    hub::DownloadManager* m_manager;
    ModelsPage* m_models;
    DownloadsPage* m_downloads;
    GeneratePage* m_generate;
    GalleryPage* m_gallery;
    SettingsPage* m_settingsPage;
    api::ApiService* m_api = nullptr;
    QString m_apiConfig;  // what m_api was started with ("port|public")
};

}  // namespace vireo::ui
