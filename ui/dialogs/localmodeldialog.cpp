#include "ui/dialogs/localmodeldialog.h"

#include "core/runtime/modelresolver.h"
#include "inference/facade/generator.h"

#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPushButton>
#include <QSettings>
#include <QVBoxLayout>

namespace vireo::ui {

namespace {

const QString kLastFolder = QStringLiteral("studio/lastModelFolder");
const QString kWeights = QStringLiteral("Model weights (*.safetensors *.gguf);;All files (*)");

QPushButton* smallButton(const QString& text, const QString& name)
{
    auto* b = new QPushButton(text);
    b->setObjectName(name);
    b->setAutoDefault(false);
    return b;
}

}  // namespace

LocalModelDialog::LocalModelDialog(QWidget* parent)
    : QDialog(parent), m_model(new QLineEdit), m_companions(new QListWidget), m_textEncoder(new QLineEdit), m_upsampler(new QLineEdit),
      m_verdict(new QLabel), m_buttons(new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel))
{
    setWindowTitle(tr("Add a local model"));
    m_model->setObjectName(QStringLiteral("modelPath"));
    m_companions->setObjectName(QStringLiteral("companions"));
    m_textEncoder->setObjectName(QStringLiteral("textEncoder"));
    m_upsampler->setObjectName(QStringLiteral("upsampler"));
    m_verdict->setObjectName(QStringLiteral("verdict"));
    m_model->setAccessibleName(tr("Model file or folder"));
    m_textEncoder->setAccessibleName(tr("Text encoder folder"));
    m_upsampler->setAccessibleName(tr("Spatial upsampler file"));
    m_model->setPlaceholderText(tr("a diffusers folder, a single .safetensors file or a GGUF transformer"));
    m_textEncoder->setPlaceholderText(tr("optional: the Gemma 3 folder, when the model has no text_encoder/"));
    m_upsampler->setPlaceholderText(tr("optional: the x2 latent upsampler, for the two-stage path"));
    m_companions->setMaximumHeight(90);
    m_companions->setToolTip(tr("The files a single file or a GGUF transformer needs beside it: its connectors, video VAE and audio VAE"));
    m_buttons->button(QDialogButtonBox::Ok)->setText(tr("Add"));
    m_verdict->setWordWrap(true);
    m_verdict->setTextInteractionFlags(Qt::TextSelectableByMouse);

    auto* modelFile = smallButton(tr("File…"), QStringLiteral("modelFile"));
    auto* modelFolder = smallButton(tr("Folder…"), QStringLiteral("modelFolder"));
    auto* addCompanionButton = smallButton(tr("Add files…"), QStringLiteral("addCompanion"));
    auto* removeCompanion = smallButton(tr("Remove"), QStringLiteral("removeCompanion"));
    auto* encoderFolder = smallButton(tr("Folder…"), QStringLiteral("textEncoderFolder"));
    auto* upsamplerFile = smallButton(tr("File…"), QStringLiteral("upsamplerFile"));

    auto row = [](QWidget* field, std::initializer_list<QWidget*> buttons) {
        auto* w = new QWidget;
        auto* h = new QHBoxLayout(w);
        h->setContentsMargins(0, 0, 0, 0);
        h->addWidget(field, 1);
        for (auto* b : buttons)
            h->addWidget(b);
        return w;
    };
    auto* companionButtons = new QWidget;
    auto* cb = new QVBoxLayout(companionButtons);
    cb->setContentsMargins(0, 0, 0, 0);
    cb->addWidget(addCompanionButton);
    cb->addWidget(removeCompanion);
    cb->addStretch(1);

    auto* form = new QFormLayout;
    form->addRow(tr("Model"), row(m_model, {modelFile, modelFolder}));
    form->addRow(tr("Companion files"), row(m_companions, {companionButtons}));
    form->addRow(tr("Text encoder"), row(m_textEncoder, {encoderFolder}));
    form->addRow(tr("Upsampler"), row(m_upsampler, {upsamplerFile}));
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(form);
    layout->addWidget(m_verdict);
    layout->addWidget(m_buttons);
    resize(720, sizeHint().height());

    connect(modelFile, &QPushButton::clicked, this, [this] {
        const auto path = QFileDialog::getOpenFileName(this, tr("A model file"), startFolder(), kWeights);
        if (!path.isEmpty())
            setModelPath(path);
    });
    connect(modelFolder, &QPushButton::clicked, this, [this] {
        const auto path = QFileDialog::getExistingDirectory(this, tr("A model folder"), startFolder());
        if (!path.isEmpty())
            setModelPath(path);
    });
    connect(addCompanionButton, &QPushButton::clicked, this, [this] {
        for (const auto& path : QFileDialog::getOpenFileNames(this, tr("Companion files"), startFolder(), kWeights))
            addCompanion(path);
    });
    connect(removeCompanion, &QPushButton::clicked, this, [this] {
        delete m_companions->currentItem();
        check();
    });
    connect(encoderFolder, &QPushButton::clicked, this, [this] {
        const auto path = QFileDialog::getExistingDirectory(this, tr("The text encoder folder"), startFolder());
        if (!path.isEmpty())
            setTextEncoder(path);
    });
    connect(upsamplerFile, &QPushButton::clicked, this, [this] {
        const auto path = QFileDialog::getOpenFileName(this, tr("The latent upsampler"), startFolder(), kWeights);
        if (!path.isEmpty())
            setUpsampler(path);
    });
    for (auto* edit : {m_model, m_textEncoder, m_upsampler})
        connect(edit, &QLineEdit::editingFinished, this, &LocalModelDialog::check);
    connect(m_buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(m_buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    check();
}

QString LocalModelDialog::startFolder() const
{
    return QSettings().value(kLastFolder).toString();
}

void LocalModelDialog::remember(const QString& path)
{
    // The folder holding what was picked, so the next dialog opens beside it.
    QSettings().setValue(kLastFolder, QFileInfo(path).absolutePath());
}

void LocalModelDialog::setModelPath(const QString& path)
{
    m_model->setText(path);
    remember(path);
    check();
}

void LocalModelDialog::addCompanion(const QString& path)
{
    if (m_companions->findItems(path, Qt::MatchExactly).isEmpty())
        m_companions->addItem(path);
    remember(path);
    check();
}

void LocalModelDialog::setTextEncoder(const QString& path)
{
    m_textEncoder->setText(path);
    remember(path);
    check();
}

void LocalModelDialog::setUpsampler(const QString& path)
{
    m_upsampler->setText(path);
    remember(path);
    check();
}

QString LocalModelDialog::entry() const
{
    QStringList paths{m_model->text().trimmed()};
    for (int i = 0; i < m_companions->count(); ++i)
        paths << m_companions->item(i)->text();
    return runtime::ModelResolver::localKey(paths, m_textEncoder->text().trimmed(), m_upsampler->text().trimmed()).mid(6);
}

void LocalModelDialog::check()
{
    // Headers only, as the Generate page reads them: what the chosen files make, or what they
    // lack, before the model is listed.
    auto* add = m_buttons->button(QDialogButtonBox::Ok);
    const QString model = m_model->text().trimmed();
    if (model.isEmpty()) {
        m_verdict->setText(tr("Choose the model: a file or a folder."));
        add->setEnabled(false);
        return;
    }
    QStringList paths{model};
    for (int i = 0; i < m_companions->count(); ++i)
        paths << m_companions->item(i)->text();
    facade::LoadPlan plan;
    QStringList missing;
    for (const auto& p : paths) {
        if (!QFileInfo::exists(p))
            missing << p;
        plan.modelPaths.emplace_back(p.toStdString());
    }
    if (!m_textEncoder->text().trimmed().isEmpty())
        plan.textEncoderPath = m_textEncoder->text().trimmed().toStdString();
    if (!m_upsampler->text().trimmed().isEmpty())
        plan.spatialUpsamplerPath = m_upsampler->text().trimmed().toStdString();
    for (const auto& p : {m_textEncoder->text().trimmed(), m_upsampler->text().trimmed()})
        if (!p.isEmpty() && !QFileInfo::exists(p))
            missing << p;
    if (!missing.isEmpty()) {
        m_verdict->setText(tr("No such file or folder: %1").arg(missing.join(QStringLiteral(", "))));
        add->setEnabled(false);
        return;
    }
    const auto facts = facade::Generator::readModelFacts(plan);
    if (!facts) {
        m_verdict->setText(tr("These files do not make a model that can run yet:\n%1").arg(QString::fromStdString(facts.error().message)));
        add->setEnabled(false);
        return;
    }
    const bool image = facts->kind == facade::ModelKind::Image;
    QString what = image ? tr("Ideogram-4 (images)") : tr("LTX-%1 (video with sound)").arg(QString::fromStdString(facts->version));
    if (!facts->trainedFor.empty())
        what += tr(", %1 (%2 says so)").arg(QString::fromStdString(facts->trainedFor), QString::fromStdString(facts->trainedForEvidence));
    m_verdict->setText(tr("Ready to add: %1.").arg(what));
    add->setEnabled(true);
}

}  // namespace vireo::ui
