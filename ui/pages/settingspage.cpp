#include "ui/pages/settingspage.h"

#include "core/runtime/devicepool.h"
#include "core/remote/remotejobs.h"
#include "core/settings/studiosettings.h"
#include "core/util/logging.h"
#include "inference/facade/generator.h"
#include "ui/pages/pagehelpers.h"

#include <QCheckBox>
#include <QComboBox>
#include <QHeaderView>
#include <QTableWidget>
#include <QDesktopServices>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QFrame>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPushButton>
#include <QScrollArea>
#include <QSignalBlocker>
#include <QDoubleSpinBox>
#include <QSpinBox>
#include <QTimer>
#include <QUrl>
#include <QVBoxLayout>

#include <cmath>

namespace vireo::ui {

namespace {

QFrame* card(QFormLayout*& form)
{
    auto* frame = new QFrame;
    frame->setObjectName(QStringLiteral("card"));
    form = new QFormLayout(frame);
    form->setContentsMargins(18, 16, 18, 16);
    form->setHorizontalSpacing(24);
    form->setVerticalSpacing(12);
    return frame;
}

QWidget* row(std::initializer_list<QWidget*> widgets, int stretchIndex = 0)
{
    auto* w = new QWidget;
    auto* l = new QHBoxLayout(w);
    l->setContentsMargins(0, 0, 0, 0);
    int i = 0;
    for (auto* x : widgets)
        l->addWidget(x, i++ == stretchIndex ? 1 : 0);
    return w;
}

}  // namespace

SettingsPage::SettingsPage(core::StudioSettings* settings, QWidget* parent)
    : QWidget(parent), m_settings(settings), m_cache(new QLineEdit), m_outputs(new QLineEdit), m_endpoint(new QLineEdit),
      m_token(new QLineEdit), m_saveToken(new QPushButton(tr("Save token"))), m_clearToken(new QPushButton(tr("Remove"))),
      m_tokenStatus(new QLabel), m_parallel(new QSpinBox), m_keepFree(new QDoubleSpinBox),
      m_offline(new QCheckBox(tr("Work offline: never contact the Hub"))), m_trusted(new QListWidget),
      m_revoke(new QPushButton(tr("Revoke"))), m_saved(new QLabel)
{
    auto* outer = new QVBoxLayout(this);
    outer->setContentsMargins(28, 24, 28, 24);
    addPageHeader(outer, tr("Settings"),
        tr("Defaults come from the Hugging Face environment (HF_HOME, HF_HUB_CACHE, HF_ENDPOINT, HF_TOKEN), so Vireo "
           "and Python tools share one cache. Changes are saved at once and apply to the next plan or download."));

    auto* content = new QWidget;
    auto* layout = new QVBoxLayout(content);
    layout->setContentsMargins(0, 0, 0, 0);

    layout->addWidget(hubCard());
    layout->addWidget(outputsCard());
    layout->addWidget(trustCard());
    layout->addWidget(devicesCard());
    layout->addWidget(hostsCard());
    layout->addWidget(apiCard());
    m_saved->setObjectName(QStringLiteral("pageSubtitle"));
    layout->addWidget(m_saved);
    layout->addStretch(1);
    auto* scroll = new QScrollArea;
    scroll->setWidget(content);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    outer->addWidget(scroll, 1);

    connect(m_settings, &core::StudioSettings::changed, this, &SettingsPage::load);
    load();
}

// The devices: the default one for the Generate page, and every device with its memory, the model
// it holds and its queue (what the "Best GPU" choice decides by).
QWidget* SettingsPage::devicesCard()
{
    QFormLayout* form = nullptr;
    auto* box = card(form);
    m_computeDevice = new QComboBox;
    m_computeDevice->setObjectName(QStringLiteral("computeDevice"));
    m_computeDevice->addItem(tr("Automatic (the first GPU, else the CPU)"), QStringLiteral("auto"));
    for (const auto& d : facade::availableDevices())
        m_computeDevice->addItem(QStringLiteral("%1 · %2").arg(QString::fromStdString(d.name), QString::fromStdString(d.description)),
            QString::fromStdString(d.name));
    m_computeDevice->setToolTip(tr("Where the Generate page runs a job unless it is told otherwise"));
    form->addRow(tr("Default device"), m_computeDevice);
    connect(m_computeDevice, &QComboBox::currentIndexChanged, this, [this] {
        m_settings->setComputeDevice(m_computeDevice->currentData().toString());
        showSaved(tr("default device"));
    });
    m_devices = new QTableWidget(0, 5);
    m_devices->setObjectName(QStringLiteral("devices"));
    m_devices->setHorizontalHeaderLabels({tr("Device"), tr("Name"), tr("Memory free"), tr("Holds"), tr("Jobs")});
    m_devices->verticalHeader()->setVisible(false);
    m_devices->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_devices->setSelectionMode(QAbstractItemView::NoSelection);
    m_devices->horizontalHeader()->setSectionResizeMode(1, QHeaderView::Stretch);
    m_devices->setMaximumHeight(160);
    form->addRow(m_devices);
    auto* timer = new QTimer(this);
    timer->setInterval(2000);
    connect(timer, &QTimer::timeout, this, [this] {
        if (isVisible())
            refreshDevices();
    });
    timer->start();
    return box;
}

void SettingsPage::setDevicePool(runtime::DevicePool* pool)
{
    m_pool = pool;
    refreshDevices();
}

void SettingsPage::refreshDevices()
{
    const auto devices = m_pool ? m_pool->devices() : runtime::DevicePool::machineSlots();
    const auto gb = [](std::int64_t bytes) -> QString {
        return QString::number(static_cast<double>(bytes) / 1e9, 'f', 1) + QStringLiteral(" GB");
    };
    m_devices->setRowCount(static_cast<int>(devices.size()));
    for (int i = 0; i < static_cast<int>(devices.size()); ++i) {
        const auto& d = devices[static_cast<std::size_t>(i)];
        const QString memory =
            d.device == "cpu" ? tr("%1 available").arg(gb(d.freeBytes)) : tr("%1 of %2").arg(gb(d.freeBytes), gb(d.totalBytes));
        const QString holds = d.residentModel.empty()
            ? tr("nothing")
            : QStringLiteral("%1 (%2)").arg(QString::fromStdString(d.residentModel), gb(d.residentBytes));
        const QStringList cells{QString::fromStdString(d.device), QString::fromStdString(d.name), memory, holds, QString::number(d.queued)};
        for (int c = 0; c < cells.size(); ++c)
            m_devices->setItem(i, c, new QTableWidgetItem(cells[c]));
    }
    m_devices->resizeColumnToContents(0);
}

// Other machines' Vireo servers: the Generate page's "Run on" box offers each, and "Any host".
QWidget* SettingsPage::hostsCard()
{
    QFormLayout* form = nullptr;
    auto* box = card(form);
    m_hosts = new QTableWidget(0, 6);
    m_hosts->setObjectName(QStringLiteral("hosts"));
    m_hosts->setHorizontalHeaderLabels({tr("Host"), tr("Address"), tr("State"), tr("GPUs"), tr("Models ready"), tr("Jobs")});
    m_hosts->verticalHeader()->setVisible(false);
    m_hosts->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_hosts->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_hosts->setSelectionMode(QAbstractItemView::SingleSelection);
    m_hosts->horizontalHeader()->setSectionResizeMode(4, QHeaderView::Stretch);
    m_hosts->setMaximumHeight(160);
    form->addRow(tr("Hosts"), m_hosts);
    m_hostName = new QLineEdit;
    m_hostName->setObjectName(QStringLiteral("hostName"));
    m_hostName->setPlaceholderText(tr("name"));
    m_hostName->setAccessibleName(tr("Host name"));
    m_hostAddress = new QLineEdit;
    m_hostAddress->setObjectName(QStringLiteral("hostAddress"));
    m_hostAddress->setPlaceholderText(tr("192.168.1.20:8188"));
    m_hostAddress->setAccessibleName(tr("Host address"));
    m_hostToken = new QLineEdit;
    m_hostToken->setObjectName(QStringLiteral("hostToken"));
    m_hostToken->setEchoMode(QLineEdit::Password);
    m_hostToken->setPlaceholderText(tr("token (its api-token file)"));
    m_hostToken->setAccessibleName(tr("Host token"));
    m_addHost = new QPushButton(tr("Add"));
    m_removeHost = new QPushButton(tr("Remove"));
    form->addRow(tr("Add a host"), row({m_hostName, m_hostAddress, m_hostToken, m_addHost, m_removeHost}, 1));
    m_hostStatus = new QLabel;
    m_hostStatus->setObjectName(QStringLiteral("hostStatus"));
    m_hostStatus->setWordWrap(true);
    form->addRow(m_hostStatus);
    connect(m_addHost, &QPushButton::clicked, this, [this] {
        const auto url = remote::normalizeBaseUrl(m_hostAddress->text().toStdString());
        if (!url) {
            m_hostStatus->setText(QString::fromStdString(url.error().message));
            return;
        }
        const auto name = m_hostName->text().trimmed().isEmpty() ? m_hostAddress->text().trimmed().section(QLatin1Char(':'), 0, 0)
                                                                 : m_hostName->text().trimmed();
        QString error;
        if (!m_settings->addRemoteHost(name, QString::fromStdString(*url), m_hostToken->text(), &error)) {
            m_hostStatus->setText(error);
            return;
        }
        m_hostToken->clear();  // kept in its own file; not left on screen
        m_hostStatus->setText(tr("Added %1 (%2); asking it…").arg(name, QString::fromStdString(*url)));
        showSaved(tr("host %1").arg(name));
        refreshHosts();
        if (m_remote)
            m_remote->refreshHosts();
    });
    connect(m_removeHost, &QPushButton::clicked, this, [this] {
        const auto* item = m_hosts->currentRow() >= 0 ? m_hosts->item(m_hosts->currentRow(), 0) : nullptr;
        if (!item)
            return;
        const auto name = item->text();
        if (m_settings->removeRemoteHost(name))
            showSaved(tr("host %1 removed").arg(name));
        refreshHosts();
    });
    auto* timer = new QTimer(this);
    timer->setInterval(10000);
    connect(timer, &QTimer::timeout, this, [this] {
        if (isVisible() && m_remote)
            m_remote->refreshHosts();
    });
    timer->start();
    refreshHosts();
    return box;
}

void SettingsPage::setRemoteJobs(remote::RemoteJobs* remote)
{
    m_remote = remote;
    connect(m_remote, &remote::RemoteJobs::hostsChanged, this, &SettingsPage::refreshHosts);
    m_remote->refreshHosts();
}

void SettingsPage::refreshHosts()
{
    const auto hosts = m_settings->remoteHosts();
    m_hosts->setRowCount(static_cast<int>(hosts.size()));
    for (int i = 0; i < hosts.size(); ++i) {
        const auto& h = hosts[i];
        const remote::HostState* state = nullptr;
        if (m_remote)
            for (const auto& s : m_remote->hostStates())
                if (QString::fromStdString(s.host.name) == h.name && QString::fromStdString(s.host.baseUrl) == h.url)
                    state = &s;
        QStringList cells{h.name, h.url};
        if (!state) {
            cells << tr("not asked yet") << QString() << QString() << QString();
        } else if (!state->reachable) {
            cells << tr("unreachable") << QString() << QString() << QString();
        } else {
            QStringList models;
            for (const auto& m : state->modelsReady)
                models << QString::fromStdString(m);
            cells << tr("ready · Vireo %1").arg(QString::fromStdString(state->version)) << QString::number(state->gpus)
                  << (models.isEmpty() ? tr("none") : models.join(QStringLiteral(", ")))
                  << QStringLiteral("%1 / %2").arg(state->jobsActive).arg(state->maxQueued);
        }
        for (int c = 0; c < cells.size(); ++c) {
            auto* item = new QTableWidgetItem(cells[c]);
            if (state && !state->reachable)
                item->setToolTip(QString::fromStdString(state->error));
            else if (state && c == 3)
                item->setToolTip(QString::fromStdString([&] {
                    std::string all;
                    for (const auto& d : state->devices)
                        all += (all.empty() ? "" : "\n") + d;
                    return all;
                }()));
            m_hosts->setItem(i, c, item);
        }
    }
    m_hosts->resizeColumnToContents(0);
}

// The Hub: cache, endpoint, token, parallel downloads, free space, offline.
QWidget* SettingsPage::hubCard()
{
    QFormLayout* hubForm = nullptr;
    auto* box = card(hubForm);
    m_cache->setObjectName(QStringLiteral("cacheEdit"));
    m_cache->setAccessibleName(tr("Model cache folder"));
    m_cache->setToolTip(tr("The huggingface_hub cache folder (models--org--name/…); partial downloads live next to it"));
    auto* browse = new QPushButton(tr("Browse…"));
    auto* resetCache = new QPushButton(tr("Default"));
    resetCache->setToolTip(tr("Back to the folder the environment names"));
    hubForm->addRow(tr("Model cache"), row({m_cache, browse, resetCache}));
    m_endpoint->setObjectName(QStringLiteral("endpointEdit"));
    m_endpoint->setToolTip(tr("The Hub's address; a mirror or a private Hub works the same way"));
    hubForm->addRow(tr("Hub endpoint"), m_endpoint);
    m_token->setObjectName(QStringLiteral("tokenEdit"));
    m_token->setAccessibleName(tr("Hub access token"));
    m_token->setEchoMode(QLineEdit::Password);
    m_token->setPlaceholderText(tr("hf_… (needed for gated models such as Gemma)"));
    m_token->setToolTip(tr("Stored in a file only you can read, never logged, never shown in full"));
    m_saveToken->setObjectName(QStringLiteral("saveToken"));
    hubForm->addRow(tr("Access token"), row({m_token, m_saveToken, m_clearToken}));
    m_tokenStatus->setObjectName(QStringLiteral("pageSubtitle"));
    m_tokenStatus->setWordWrap(true);
    hubForm->addRow(QString(), m_tokenStatus);
    m_parallel->setObjectName(QStringLiteral("parallelBox"));
    m_parallel->setRange(1, 16);
    m_parallel->setToolTip(tr("Files downloaded at the same time; large files also come in parallel ranges"));
    m_parallel->setMaximumWidth(90);
    hubForm->addRow(tr("Parallel downloads"), m_parallel);
    m_keepFree->setObjectName(QStringLiteral("keepFreeBox"));
    m_keepFree->setRange(0.0, 1000.0);
    m_keepFree->setDecimals(2);
    m_keepFree->setSingleStep(0.5);
    m_keepFree->setSuffix(QStringLiteral(" GB"));
    m_keepFree->setToolTip(tr("A download starts only if the cache's disk keeps at least this much free afterwards, "
                              "so the system and other programs never run out of space"));
    m_keepFree->setMaximumWidth(110);
    hubForm->addRow(tr("Keep free on disk"), m_keepFree);
    m_offline->setObjectName(QStringLiteral("offlineBox"));
    hubForm->addRow(tr("Network"), m_offline);

    connect(m_cache, &QLineEdit::editingFinished, this, [this]() {
        if (m_cache->text() == m_settings->cacheFolder())
            return;
        m_settings->setCacheFolder(m_cache->text());
        showSaved(tr("model cache"));
    });
    connect(browse, &QPushButton::clicked, this, [this]() {
        const auto dir = QFileDialog::getExistingDirectory(this, tr("Model cache folder"), m_settings->cacheFolder());
        if (dir.isEmpty())
            return;
        m_settings->setCacheFolder(dir);
        showSaved(tr("model cache"));
    });
    connect(resetCache, &QPushButton::clicked, this, [this]() {
        m_settings->setCacheFolder(QString());
        showSaved(tr("model cache"));
    });
    connect(m_endpoint, &QLineEdit::editingFinished, this, [this]() {
        if (m_endpoint->text() == m_settings->endpoint())
            return;
        const auto url = QUrl(m_endpoint->text().trimmed());
        if (!m_endpoint->text().trimmed().isEmpty()
            && (!url.isValid() || (url.scheme() != QStringLiteral("https") && url.scheme() != QStringLiteral("http")))) {
            m_saved->setText(tr("The endpoint must be an http(s) address"));
            return;
        }
        m_settings->setEndpoint(m_endpoint->text());
        showSaved(tr("Hub endpoint"));
    });
    connect(m_saveToken, &QPushButton::clicked, this, [this]() {
        QString error;
        if (!m_settings->setToken(m_token->text(), &error)) {
            m_tokenStatus->setText(error);
            return;
        }
        m_token->clear();
        showSaved(tr("access token"));
    });
    connect(m_token, &QLineEdit::returnPressed, m_saveToken, &QPushButton::click);
    connect(m_clearToken, &QPushButton::clicked, this, [this]() {
        m_settings->setToken(QString());
        showSaved(tr("access token removed"));
    });
    connect(m_parallel, &QSpinBox::valueChanged, this, [this](int v) {
        if (v == m_settings->parallelDownloads())
            return;
        m_settings->setParallelDownloads(v);
        showSaved(tr("parallel downloads"));
    });
    connect(m_keepFree, &QDoubleSpinBox::valueChanged, this, [this](double gb) {
        const auto bytes = static_cast<quint64>(std::llround(gb * 1e9));
        // The box shows two decimals: an unchanged display is not a new setting.
        if (std::llround(static_cast<double>(m_settings->headroomBytes()) / 1e7) == std::llround(gb * 100))
            return;
        m_settings->setHeadroomBytes(bytes);
        showSaved(tr("space kept free"));
    });
    connect(m_offline, &QCheckBox::toggled, this, [this](bool on) {
        if (on == m_settings->offline())
            return;
        m_settings->setOffline(on);
        showSaved(on ? tr("offline mode on") : tr("offline mode off"));
    });
    return box;
}

// Where videos and images go (the gallery watches it); the Gallery adopts what is there.
QWidget* SettingsPage::outputsCard()
{
    QFormLayout* outputsForm = nullptr;
    auto* box = card(outputsForm);
    m_outputs->setObjectName(QStringLiteral("outputsEdit"));
    m_outputs->setToolTip(tr("Every video and image is written here with its recipe; the Gallery lists what it holds"));
    m_outputs->setAccessibleName(tr("Outputs folder"));
    auto* browseOutputs = new QPushButton(tr("Browse…"));
    auto* resetOutputs = new QPushButton(tr("Default"));
    resetOutputs->setToolTip(tr("Back to Videos/Vireo Studio"));
    outputsForm->addRow(tr("Outputs folder"), row({m_outputs, browseOutputs, resetOutputs}));

    connect(m_outputs, &QLineEdit::editingFinished, this, [this]() {
        if (m_outputs->text() != m_settings->outputsFolder())
            chooseOutputs(m_outputs->text());
    });
    connect(browseOutputs, &QPushButton::clicked, this, [this]() {
        const auto dir = QFileDialog::getExistingDirectory(this, tr("Outputs folder"), m_settings->outputsFolder());
        if (!dir.isEmpty())
            chooseOutputs(dir);
    });
    connect(resetOutputs, &QPushButton::clicked, this, [this]() { chooseOutputs(QString()); });
    return box;
}

// Repos approved outside the catalog's publishers, and where the logs are.
QWidget* SettingsPage::trustCard()
{
    QFormLayout* trustForm = nullptr;
    auto* box = card(trustForm);
    m_trusted->setObjectName(QStringLiteral("trustedList"));
    m_trusted->setMaximumHeight(140);
    m_trusted->setToolTip(tr("Repos you approved outside the catalog's publishers"));
    m_revoke->setObjectName(QStringLiteral("revokeButton"));
    m_revoke->setToolTip(tr("Ask again before the next download from this repo"));
    trustForm->addRow(tr("Trusted repos"), row({m_trusted, m_revoke}));
    auto* logs = new QLabel(core::logDirectory());
    logs->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto* openLogs = new QPushButton(tr("Open"));
    connect(openLogs, &QPushButton::clicked, this, []() { QDesktopServices::openUrl(QUrl::fromLocalFile(core::logDirectory())); });
    trustForm->addRow(tr("Logs"), row({logs, openLogs}));

    connect(m_revoke, &QPushButton::clicked, this, [this]() {
        if (auto* item = m_trusted->currentItem()) {
            const auto repo = item->text();
            m_settings->revokeRepo(repo);
            showSaved(tr("%1 is no longer trusted").arg(repo));
        }
    });
    connect(m_trusted, &QListWidget::currentRowChanged, this, [this](int r) { m_revoke->setEnabled(r >= 0); });
    return box;
}

void SettingsPage::showSaved(const QString& what)
{
    m_saved->setText(tr("Saved: %1").arg(what));
    QTimer::singleShot(4000, m_saved, [this]() { m_saved->clear(); });
}

// A folder that cannot be made or written is refused here, not at the end of a run.
void SettingsPage::chooseOutputs(const QString& folder)
{
    if (!folder.trimmed().isEmpty()) {
        const QString clean = QDir::cleanPath(folder.trimmed());
        if (!QDir().mkpath(clean) || !QFileInfo(clean).isWritable()) {
            m_saved->setText(tr("%1 cannot be written; choose another folder").arg(clean));
            m_outputs->setText(m_settings->outputsFolder());
            return;
        }
    }
    m_settings->setOutputsFolder(folder);
    showSaved(tr("outputs folder"));
}

// The local HTTP API: other programs (scripts, chat front ends, the openai client) drive this
// studio's engines; their jobs share its queue and their outputs land in its Gallery.
QWidget* SettingsPage::apiCard()
{
    QFormLayout* form = nullptr;
    auto* box = card(form);
    m_api = new QCheckBox(tr("Serve the local API (OpenAI-compatible images and videos)"));
    m_api->setObjectName(QStringLiteral("apiEnabled"));
    m_api->setToolTip(tr("Other programs on this machine can then make images and videos with the models here"));
    m_apiPort = new QSpinBox;
    m_apiPort->setObjectName(QStringLiteral("apiPort"));
    m_apiPort->setAccessibleName(tr("API port"));
    m_apiPort->setRange(1, 65535);
    m_apiPublic = new QCheckBox(tr("Answer other machines too (they must send the API token)"));
    m_apiPublic->setObjectName(QStringLiteral("apiPublic"));
    m_apiPublic->setToolTip(tr("Listens on every network interface; for TLS put a reverse proxy (Caddy, nginx) in front"));
    m_apiStatus = new QLabel;
    m_apiStatus->setObjectName(QStringLiteral("pageSubtitle"));
    m_apiStatus->setWordWrap(true);
    m_apiStatus->setTextInteractionFlags(Qt::TextSelectableByMouse);
    form->addRow(tr("Local API"), m_api);
    form->addRow(tr("Port"), m_apiPort);
    form->addRow(QString(), m_apiPublic);
    form->addRow(QString(), m_apiStatus);
    const auto apply = [this] {
        m_settings->setApi(m_api->isChecked(), m_apiPort->value(), m_apiPublic->isChecked());
        showSaved(tr("local API"));
    };
    connect(m_api, &QCheckBox::toggled, this, apply);
    connect(m_apiPublic, &QCheckBox::toggled, this, apply);
    connect(m_apiPort, &QSpinBox::editingFinished, this, apply);
    return box;
}

void SettingsPage::setApiStatus(const QString& text)
{
    m_apiStatus->setText(text);
}

void SettingsPage::load()
{
    if (!m_cache->hasFocus())
        m_cache->setText(m_settings->cacheFolder());
    if (!m_outputs->hasFocus())
        m_outputs->setText(m_settings->outputsFolder());
    if (!m_endpoint->hasFocus())
        m_endpoint->setText(m_settings->endpoint());
    using S = core::StudioSettings::TokenSource;
    switch (m_settings->tokenSource()) {
    case S::None: m_tokenStatus->setText(tr("No token: public models only; gated ones will ask for it.")); break;
    case S::Settings:
        m_tokenStatus->setText(
            tr("Using %1, stored in %2 (readable only by you).").arg(m_settings->maskedToken(), m_settings->tokenFilePath()));
        break;
    case S::Environment: m_tokenStatus->setText(tr("Using %1 from HF_TOKEN in the environment.").arg(m_settings->maskedToken())); break;
    case S::TokenFile: m_tokenStatus->setText(tr("Using %1 from the Hugging Face token file.").arg(m_settings->maskedToken())); break;
    }
    m_clearToken->setEnabled(m_settings->tokenSource() == S::Settings);
    m_parallel->setValue(m_settings->parallelDownloads());
    {
        // Showing a value is not choosing one (a margin beyond the box's range stays as set).
        const QSignalBlocker quiet(m_keepFree);
        m_keepFree->setValue(static_cast<double>(m_settings->headroomBytes()) / 1e9);
    }
    m_offline->setChecked(m_settings->offline());
    {
        const QSignalBlocker quiet(m_computeDevice);
        const int i = m_computeDevice->findData(m_settings->computeDevice());
        m_computeDevice->setCurrentIndex(i < 0 ? 0 : i);
    }
    {
        const QSignalBlocker a(m_api), b(m_apiPort), c(m_apiPublic);
        m_api->setChecked(m_settings->apiEnabled());
        if (!m_apiPort->hasFocus())
            m_apiPort->setValue(m_settings->apiPort());
        m_apiPublic->setChecked(m_settings->apiPublic());
    }
    m_trusted->clear();
    m_trusted->addItems(m_settings->trustedRepos());
    m_revoke->setEnabled(false);
}

}  // namespace vireo::ui
