#include "ui/pages/modelspage.h"

#include "core/models/localmodelinspector.h"
#include "ui/pages/catalogpanel.h"
#include "ui/pages/pagehelpers.h"

#include <QDragEnterEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLocale>
#include <QMimeData>
#include <QPushButton>
#include <QSettings>
#include <QStyle>
#include <QTabWidget>
#include <QTreeWidget>
#include <QVBoxLayout>

namespace vireo::ui {

namespace {

QString q(const std::string& s)
{
    return QString::fromStdString(s);
}

QString sizeText(std::uint64_t bytes)
{
    return QLocale().formattedDataSize(static_cast<qint64>(bytes), 2, QLocale::DataSizeSIFormat);
}

QTreeWidgetItem* addRow(QTreeWidget* tree, const QString& key, const QString& value, const QString& tip = {})
{
    auto* item = new QTreeWidgetItem(tree, {key, value});
    if (!tip.isEmpty()) {
        item->setToolTip(0, tip);
        item->setToolTip(1, tip);
    }
    return item;
}

QTreeWidgetItem* addChild(QTreeWidgetItem* parent, const QString& key, const QString& value)
{
    return new QTreeWidgetItem(parent, {key, value});
}

void addJson(QTreeWidgetItem* parent, const QString& key, const QJsonValue& value)
{
    if (value.isObject()) {
        auto* item = addChild(parent, key, {});
        const auto obj = value.toObject();
        for (auto it = obj.begin(); it != obj.end(); ++it)
            addJson(item, it.key(), it.value());
    } else if (value.isArray()) {
        const auto arr = value.toArray();
        auto* item = addChild(parent, key, countOf(arr.size(), QObject::tr("item"), QObject::tr("items")));
        for (qsizetype i = 0; i < arr.size() && i < 64; ++i)
            addJson(item, QString::number(i), arr.at(i));
    } else {
        QString text = value.isString()
            ? value.toString()
            : QString::fromUtf8(QJsonDocument(QJsonArray{value}).toJson(QJsonDocument::Compact)).mid(1).chopped(1);
        addChild(parent, key, text);
    }
}

QString familyText(const vireo::inspect::ModelReport& r)
{
    if (r.family == "ltx-2")
        return r.version.empty() ? QObject::tr("LTX-2 audio-video model") : QObject::tr("LTX-%1 audio-video model").arg(q(r.version));
    if (r.family == "ltx-video")
        return QObject::tr("LTX-Video model (no audio stream)");
    if (r.family == "ideogram-4")
        return QObject::tr("Ideogram-4 image model");
    return QObject::tr("Not a model family this studio knows");
}

QString quantizationText(const vireo::inspect::QuantizationReport& qr)
{
    if (qr.scheme == "none")
        return QObject::tr("None (dense weights)");
    if (qr.scheme == "fp8-scaled") {
        QString text = QObject::tr("Scaled FP8, %1 scales").arg(q(qr.fp8Granularity));
        if (!qr.fp8BlockSize.empty())
            text += QObject::tr(" (%1x%2 blocks)").arg(qr.fp8BlockSize[0]).arg(qr.fp8BlockSize[1]);
        return text + (qr.inputScale.value_or(false) ? QObject::tr(", with input scales") : QString());
    }
    if (qr.scheme == "gguf")
        return QObject::tr("GGUF (%1)").arg(qr.ggufArchitecture.empty() ? QObject::tr("no architecture key") : q(qr.ggufArchitecture));
    if (qr.scheme == "nf4")
        return qr.nf4DoubleQuant ? QObject::tr("NF4 (bitsandbytes, double-quantized)") : QObject::tr("NF4 (bitsandbytes)");
    if (qr.scheme == "fp8")
        return QObject::tr("FP8 without scales");
    return q(qr.scheme);
}

}  // namespace

ModelsPage::ModelsPage(hub::DownloadManager* manager, QWidget* parent)
    : QWidget(parent), m_inspector(new core::LocalModelInspector(this)), m_tabs(new QTabWidget), m_catalog(new CatalogPanel(manager))
{
    setAcceptDrops(true);
    auto* page = new QVBoxLayout(this);
    page->setContentsMargins(28, 24, 28, 24);
    addPageHeader(page, tr("Models"),
        tr("Pick a model from the catalog or any Hugging Face repo and see what it costs before anything downloads, "
           "or open a checkpoint from disk to see what it is."));
    m_tabs->setObjectName(QStringLiteral("modelTabs"));
    m_tabs->setDocumentMode(true);
    m_tabs->addTab(m_catalog, tr("Catalog and Hub"));
    auto* disk = new QWidget;
    m_tabs->addTab(disk, tr("On this computer"));
    m_tabs->setTabToolTip(0, tr("Models the studio knows, any Hub repo, and what is already in your Hugging Face cache"));
    m_tabs->setTabToolTip(1, tr("A file or folder on disk, inspected from its headers"));
    page->addWidget(m_tabs, 1);
    connect(m_catalog, &CatalogPanel::taskOpened, this, &ModelsPage::taskOpened);
    auto* layout = new QVBoxLayout(disk);
    layout->setContentsMargins(0, 12, 0, 0);

    m_dropZone = new QFrame;
    m_dropZone->setObjectName(QStringLiteral("dropZone"));
    auto* dropLayout = new QHBoxLayout(m_dropZone);
    dropLayout->setContentsMargins(16, 14, 16, 14);
    auto* hint = new QLabel(tr("Drop a .safetensors or .gguf file, a model folder or a Hugging Face cache folder here, or"));
    hint->setObjectName(QStringLiteral("pageSubtitle"));
    hint->setWordWrap(true);
    m_openFile = new QPushButton(style()->standardIcon(QStyle::SP_FileIcon), tr("Open &file…"));
    m_openFile->setObjectName(QStringLiteral("primary"));
    m_openFile->setToolTip(tr("A .safetensors, .gguf or *.safetensors.index.json file (Ctrl+O)"));
    m_openFolder = new QPushButton(style()->standardIcon(QStyle::SP_DirIcon), tr("Open f&older…"));
    m_openFolder->setToolTip(tr("A diffusers folder (model_index.json), a Hub cache folder (models--org--name) or any folder of weights"));
    dropLayout->addWidget(hint, 1);
    dropLayout->addWidget(m_openFile);
    dropLayout->addWidget(m_openFolder);
    layout->addWidget(m_dropZone);

    m_status = new QLabel;
    m_status->setObjectName(QStringLiteral("pageSubtitle"));
    m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_error = new QLabel;
    m_error->setObjectName(QStringLiteral("errorText"));
    m_error->setWordWrap(true);
    m_error->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_error->hide();
    layout->addSpacing(8);
    layout->addWidget(m_status);
    layout->addWidget(m_error);
    // A model that generates is one click from the Generate page (it was only inspected).
    m_use = new QPushButton(tr("Use on the Generate page"));
    m_use->setObjectName(QStringLiteral("useModel"));
    m_use->hide();
    connect(m_use, &QPushButton::clicked, this, [this] { emit useRequested(m_reportPath); });
    layout->addWidget(m_use, 0, Qt::AlignLeft);

    m_report = new QTreeWidget;
    m_report->setColumnCount(2);
    m_report->setHeaderLabels({tr("Property"), tr("Value")});
    m_report->header()->setSectionResizeMode(0, QHeaderView::ResizeToContents);
    m_report->setAlternatingRowColors(true);
    m_report->setUniformRowHeights(true);
    m_report->hide();
    layout->addWidget(m_report, 1);
    layout->addStretch(0);

    connect(m_openFile, &QPushButton::clicked, this, &ModelsPage::chooseFile);
    connect(m_openFolder, &QPushButton::clicked, this, &ModelsPage::chooseFolder);
    connect(m_inspector, &core::LocalModelInspector::finished, this, &ModelsPage::showReport);
    connect(m_inspector, &core::LocalModelInspector::failed, this, &ModelsPage::showError);
    connect(m_inspector, &core::LocalModelInspector::started, this, [this](const QString& path) {
        m_status->setText(tr("Reading headers of %1…").arg(path));
        m_error->hide();
    });
    m_status->setText(tr("No model opened yet. Only headers are read; weights stay on disk."));
}

QString ModelsPage::statusText() const
{
    return m_error->isHidden() ? m_status->text() : m_error->text();
}

void ModelsPage::openPath(const QString& path)
{
    const QString absolute = QFileInfo(path).absoluteFilePath();
    QSettings().setValue(QStringLiteral("models/lastPath"), absolute);
    m_tabs->setCurrentIndex(1);
    m_inspector->inspect(absolute);
}

void ModelsPage::chooseFile()
{
    const QString start = QSettings().value(QStringLiteral("models/lastPath")).toString();
    const QString path = QFileDialog::getOpenFileName(
        this, tr("Open a model file"), QFileInfo(start).path(), tr("Model weights (*.safetensors *.gguf *.json);;All files (*)"));
    if (!path.isEmpty())
        openPath(path);
}

void ModelsPage::chooseFolder()
{
    const QString start = QSettings().value(QStringLiteral("models/lastPath")).toString();
    const QString path = QFileDialog::getExistingDirectory(this, tr("Open a model folder"), QFileInfo(start).path());
    if (!path.isEmpty())
        openPath(path);
}

void ModelsPage::showReport(const QString& path, const vireo::inspect::ModelReport& r)
{
    m_error->hide();
    m_reportPath = path;
    m_use->setVisible((r.family == "ltx-2" || r.family == "ideogram-4") && r.missingComponents.empty());
    m_status->setText(tr("%1 — read from headers only").arg(path));
    m_report->clear();
    addRow(m_report, tr("Recognized"), familyText(r) + (r.attention.empty() ? QString() : QStringLiteral(", ") + q(r.attention)));
    addRow(m_report, tr("Format"),
        q(r.format) + QStringLiteral(" · ") + countOf(static_cast<qint64>(r.files.size()), tr("file"), tr("files")));
    addRow(m_report, tr("Tensors"), QLocale().toString(static_cast<qlonglong>(r.tensors)));
    addRow(m_report, tr("Size on disk"), sizeText(r.bytes), tr("%1 bytes").arg(QLocale().toString(static_cast<qulonglong>(r.bytes))));
    auto* types = addRow(m_report, tr("Types"), countOf(static_cast<qint64>(r.dtypes.size()), tr("type"), tr("types")));
    for (const auto& [name, count] : r.dtypes)
        addChild(types, q(name), QLocale().toString(static_cast<qlonglong>(count)));
    QStringList components;
    for (const auto& c : r.components)
        components << q(c);
    addRow(m_report, tr("Components"), components.isEmpty() ? tr("none recognized") : components.join(QStringLiteral(", ")),
        tr("Parts of the pipeline this file or folder carries"));
    if (!r.missingComponents.empty()) {
        QStringList missing;
        for (const auto& c : r.missingComponents)
            missing << q(c);
        addRow(m_report, tr("Missing"), missing.join(QStringLiteral(", ")), tr("Named by model_index.json but not on disk"));
    }
    auto* quant = addRow(m_report, tr("Quantization"), quantizationText(r.quantization));
    if (r.quantization.scheme != "none") {
        addChild(quant, tr("Quantized tensors"), QString::number(r.quantization.quantizedTensors));
        addChild(quant, tr("Dense tensors"), QString::number(r.quantization.denseTensors));
        if (!r.quantization.fp8Convention.empty())
            addChild(quant, tr("Convention"), q(r.quantization.fp8Convention));
        for (const auto& [type, count] : r.quantization.ggufTypes)
            addChild(quant, q(type), QString::number(count));
    }
    for (const auto& [key, value] : r.facts)
        addRow(m_report, q(key), q(value));
    if (r.files.size() > 1) {
        auto* files = addRow(m_report, tr("Files"), QString::number(r.files.size()));
        for (const auto& f : r.files)
            addChild(files, q(f.path), tr("%1 tensors · %2").arg(f.tensors).arg(sizeText(f.bytes)));
    }
    const auto metadata = QJsonDocument::fromJson(QByteArray::fromStdString(r.metadataJson)).object();
    if (!metadata.isEmpty()) {
        auto* item = addRow(m_report, tr("Metadata"), countOf(static_cast<qint64>(metadata.size()), tr("file"), tr("files")));
        for (auto it = metadata.begin(); it != metadata.end(); ++it)
            addJson(item, it.key(), it.value());
    }
    for (const auto& w : r.warnings) {
        auto* item = addRow(m_report, tr("Warning"), q(w));
        item->setForeground(1, QBrush(QColor(0xff, 0xc0, 0x66)));
    }
    m_report->show();
    emit inspectionFinished(path, true);
}

void ModelsPage::showError(const QString& path, const QString& message)
{
    m_status->setText(tr("Could not open %1").arg(path));
    m_error->setText(message);
    m_error->show();
    m_use->hide();
    m_report->clear();
    m_report->hide();
    emit inspectionFinished(path, false);
}

void ModelsPage::setDragActive(bool active)
{
    m_dropZone->setProperty("dragActive", active);
    m_dropZone->style()->unpolish(m_dropZone);
    m_dropZone->style()->polish(m_dropZone);
}

void ModelsPage::dragEnterEvent(QDragEnterEvent* event)
{
    if (event->mimeData()->hasUrls() && event->mimeData()->urls().size() == 1 && event->mimeData()->urls().front().isLocalFile()) {
        setDragActive(true);
        event->acceptProposedAction();
    }
}

void ModelsPage::dragLeaveEvent(QDragLeaveEvent*)
{
    setDragActive(false);
}

void ModelsPage::dropEvent(QDropEvent* event)
{
    setDragActive(false);
    const auto urls = event->mimeData()->urls();
    if (urls.size() == 1 && urls.front().isLocalFile()) {
        openPath(urls.front().toLocalFile());
        event->acceptProposedAction();
    }
}

}  // namespace vireo::ui
