#pragma once

#include <QWidget>

class QCheckBox;
class QComboBox;
class QTableWidget;
class QLabel;
class QLineEdit;
class QListWidget;
class QPushButton;
class QDoubleSpinBox;
class QSpinBox;

namespace vireo::core {
class StudioSettings;
}
namespace vireo::runtime {
class DevicePool;
}
namespace vireo::remote {
class RemoteJobs;
}

namespace vireo::ui {

// Cache folder, Hub endpoint, access token, parallel downloads, offline mode and the repos
// the user trusted. Changes are saved at once and apply to the next plan or download.
class SettingsPage : public QWidget {
    Q_OBJECT
public:
    explicit SettingsPage(core::StudioSettings* settings, QWidget* parent = nullptr);

    QLineEdit* cacheEdit() const { return m_cache; }
    QLineEdit* endpointEdit() const { return m_endpoint; }
    QLineEdit* tokenEdit() const { return m_token; }
    QPushButton* saveTokenButton() const { return m_saveToken; }
    QLabel* tokenStatus() const { return m_tokenStatus; }
    QSpinBox* parallelBox() const { return m_parallel; }
    QDoubleSpinBox* keepFreeBox() const { return m_keepFree; }
    QCheckBox* offlineBox() const { return m_offline; }
    QListWidget* trustedList() const { return m_trusted; }
    QCheckBox* apiBox() const { return m_api; }
    QSpinBox* apiPortBox() const { return m_apiPort; }
    QCheckBox* apiPublicBox() const { return m_apiPublic; }
    QLabel* apiStatus() const { return m_apiStatus; }
    // What the window's API service says: the address it serves, or why it does not.
    void setApiStatus(const QString& text);
    QPushButton* revokeButton() const { return m_revoke; }
    // The Devices card lists what the pool sees: each device's name, free memory, the model it
    // holds and its queue (refreshed every 2 s while the page is shown).
    void setDevicePool(runtime::DevicePool* pool);
    QTableWidget* devicesTable() const { return m_devices; }
    QComboBox* computeDeviceBox() const { return m_computeDevice; }
    void refreshDevices();
    // The Hosts card: other machines' Vireo servers, added by hand (name, address, token), each
    // with what it said at the last look (reachable, GPUs, models ready, its queue), asked every
    // 10 s while the page is shown.
    void setRemoteJobs(remote::RemoteJobs* remote);
    QTableWidget* hostsTable() const { return m_hosts; }
    QLineEdit* hostNameEdit() const { return m_hostName; }
    QLineEdit* hostAddressEdit() const { return m_hostAddress; }
    QLineEdit* hostTokenEdit() const { return m_hostToken; }
    QPushButton* addHostButton() const { return m_addHost; }
    QPushButton* removeHostButton() const { return m_removeHost; }
    QLabel* hostStatus() const { return m_hostStatus; }
    void refreshHosts();

private:
    void load();
    QWidget* hubCard();
    QWidget* outputsCard();
    QWidget* trustCard();
    QWidget* apiCard();
    QWidget* devicesCard();
    QWidget* hostsCard();
    // "Saved: …" for a few seconds under the cards.
    void showSaved(const QString& what);
    void chooseOutputs(const QString& folder);

    core::StudioSettings* m_settings;
    QLineEdit* m_cache;
    QLineEdit* m_outputs;
    QCheckBox* m_api = nullptr;
    QSpinBox* m_apiPort = nullptr;
    QCheckBox* m_apiPublic = nullptr;
    QLabel* m_apiStatus = nullptr;
    QLineEdit* m_endpoint;
    QLineEdit* m_token;
    QPushButton* m_saveToken;
    QPushButton* m_clearToken;
    QLabel* m_tokenStatus;
    QSpinBox* m_parallel;
    QDoubleSpinBox* m_keepFree;
    QCheckBox* m_offline;
    QListWidget* m_trusted;
    QPushButton* m_revoke;
    QLabel* m_saved;
    QComboBox* m_computeDevice = nullptr;
    QTableWidget* m_devices = nullptr;
    runtime::DevicePool* m_pool = nullptr;
    QTableWidget* m_hosts = nullptr;
    QLineEdit* m_hostName = nullptr;
    QLineEdit* m_hostAddress = nullptr;
    QLineEdit* m_hostToken = nullptr;
    QPushButton* m_addHost = nullptr;
    QPushButton* m_removeHost = nullptr;
    QLabel* m_hostStatus = nullptr;
    remote::RemoteJobs* m_remote = nullptr;
};

}  // namespace vireo::ui
