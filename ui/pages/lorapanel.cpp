#include "ui/pages/lorapanel.h"

#include <QApplication>
#include <QLayout>
#include <QDoubleSpinBox>
#include <QLineEdit>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QInputDialog>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QPointer>
#include <QPushButton>
#include <QRegularExpression>
#include <QThreadPool>
#include <QVBoxLayout>

#include <algorithm>

namespace vireo::ui {

namespace {

QString colourOf(const QString& status)
{
    if (status.startsWith(QStringLiteral("applied")))
        return QStringLiteral("#7fd47f");
    if (status.startsWith(QStringLiteral("partial")))
        return QStringLiteral("#e8c070");
    if (status.startsWith(QStringLiteral("refused")))
        return QStringLiteral("#ff8a80");
    return QStringLiteral("#9aa3b2");
}

}  // namespace

LoraPanel::LoraPanel(QWidget* parent) : QFrame(parent)
{
    setObjectName(QStringLiteral("card"));
    auto* outer = new QVBoxLayout(this);
    outer->setContentsMargins(16, 12, 16, 14);
    auto* heading = new QLabel(tr("LoRAs"));
    heading->setObjectName(QStringLiteral("cardTitle"));
    outer->addWidget(heading);
    m_empty = new QLabel(tr("None. A LoRA changes the style or the camera of the model; each is checked against the model "
                            "before it runs, and changing them between clips reloads nothing."));
    m_empty->setWordWrap(true);
    m_empty->setStyleSheet(QStringLiteral("color:#9aa3b2"));
    outer->addWidget(m_empty);
    m_rows = new QVBoxLayout;
    m_rows->setSpacing(6);
    outer->addLayout(m_rows);
    auto* buttons = new QHBoxLayout;
    auto* add = new QPushButton(tr("Add LoRA file…"));
    add->setObjectName(QStringLiteral("addLora"));
    auto* hub = new QPushButton(tr("From the Hub…"));
    hub->setObjectName(QStringLiteral("hubLora"));
    hub->setToolTip(
        tr("Download a LoRA repository into the Hugging Face cache (repos outside the catalog's publishers need your approval)"));
    buttons->addWidget(add);
    buttons->addWidget(hub);
    buttons->addStretch(1);
    outer->addLayout(buttons);
    connect(add, &QPushButton::clicked, this, [this] {
        const auto files = QFileDialog::getOpenFileNames(this, tr("Add LoRA"), QString(), tr("LoRA weights (*.safetensors *.gguf)"));
        for (const auto& f : files)
            addLora(f);
    });
    connect(hub, &QPushButton::clicked, this, [this] {
        bool ok = false;
        const auto repo =
            QInputDialog::getText(this, tr("LoRA from the Hub"), tr("Repository (owner/name):"), QLineEdit::Normal, QString(), &ok)
                .trimmed();
        static const QRegularExpression id(QStringLiteral("^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$"));
        if (ok && id.match(repo).hasMatch())
            emit hubLoraRequested(repo);
    });
}

std::vector<facade::LoraRequest> LoraPanel::requests() const
{
    std::vector<facade::LoraRequest> out;
    for (const auto& e : m_entries)
        out.push_back({e.path.toStdString(), e.strength});
    return out;
}

void LoraPanel::addLora(const QString& pathIn, double strength)
{
    const auto path = QFileInfo(pathIn).absoluteFilePath();
    for (const auto& e : m_entries)
        if (e.path == path)
            return;
    m_entries.append({path, strength, {}, {}});
    rebuild();
    check(static_cast<int>(m_entries.size()) - 1);
    emit changed();
}

bool LoraPanel::hasInContextLora() const
{
    return std::any_of(m_entries.begin(), m_entries.end(), [](const Entry& e) { return e.inContext; });
}

void LoraPanel::setReference(const QString& path, double strength, const std::string& sha256)
{
    m_referencePath = path;
    m_referenceStrength = std::clamp(strength, 0.0, 1.0);
    m_referenceSha256 = sha256;
    rebuild();
    emit changed();
}

void LoraPanel::clearReference()
{
    if (m_referencePath.isEmpty())
        return;
    m_referencePath.clear();
    m_referenceSha256.clear();
    m_referenceStrength = 1.0;
    rebuild();
    emit changed();
}

std::vector<runtime::ReferenceFile> LoraPanel::references() const
{
    if (m_referencePath.isEmpty() || !hasInContextLora())
        return {};
    return {runtime::ReferenceFile{m_referencePath, m_referenceStrength, m_referenceSha256}};
}

void LoraPanel::removeLora(int row)
{
    if (row < 0 || row >= m_entries.size())
        return;
    // The reference clip is its IC-LoRA's: it goes with it.
    if (m_entries[row].inContext)
        m_referencePath.clear();
    m_entries.removeAt(row);
    ++m_generation;  // results of running checks no longer match rows
    rebuild();
    for (int i = 0; i < m_entries.size(); ++i)
        check(i);
    emit changed();
}

void LoraPanel::setStrength(int row, double strength)
{
    if (row < 0 || row >= m_entries.size() || m_entries[row].strength == strength)
        return;
    m_entries[row].strength = strength;
    emit changed();
}

void LoraPanel::clear()
{
    m_entries.clear();
    m_referencePath.clear();
    m_referenceSha256.clear();
    ++m_generation;
    rebuild();
    emit changed();
}

void LoraPanel::setFromRecipe(const std::vector<output::LoraUse>& loras)
{
    m_entries.clear();
    ++m_generation;
    for (const auto& l : loras)
        m_entries.append({QString::fromStdString(l.path), l.strength, {}, {}});
    rebuild();
    for (int i = 0; i < m_entries.size(); ++i)
        check(i);
    emit changed();
}

void LoraPanel::setModel(const std::optional<facade::LoadPlan>& model)
{
    const bool same = model && m_model && model->modelPaths == m_model->modelPaths;
    if (same || (!model && !m_model))
        return;
    m_model = model;
    ++m_generation;
    for (int i = 0; i < m_entries.size(); ++i)
        check(i);
    rebuild();
}

void LoraPanel::showOutcomes(const std::vector<output::LoraUse>& applied)
{
    for (const auto& a : applied)
        for (auto& e : m_entries)
            if (e.path.toStdString() == a.path)
                e.status = QString::fromStdString(a.status);
    rebuild();
}

void LoraPanel::check(int row)
{
    auto& e = m_entries[row];
    if (!QFileInfo(e.path).isFile()) {
        e.status = tr("refused: %1 is not there any more (moved or deleted?)").arg(e.path);
        return;
    }
    if (!m_model) {
        e.status = tr("checked when a model is chosen");
        return;
    }
    e.status = tr("checking…");
    ++m_pending;
    const auto generation = m_generation;
    const auto plan = *m_model;
    const auto path = e.path;
    QPointer<LoraPanel> self(this);
    QThreadPool::globalInstance()->start([self, generation, plan, path] {
        // Headers only: a few milliseconds, even for a large file.
        auto report = facade::Generator::inspectLora(plan, path.toStdString(), true);
        QString status, text;
        bool inContext = false;
        if (!report) {
            status = QStringLiteral("refused: ") + QString::fromStdString(report.error().message);
        } else {
            const auto json = QJsonDocument::fromJson(QByteArray::fromStdString(*report)).object();
            status = json.value(QStringLiteral("status")).toString();
            inContext = json.value(QStringLiteral("in_context")).toBool();
            auto textReport = facade::Generator::inspectLora(plan, path.toStdString(), false);
            text = textReport ? QString::fromStdString(*textReport) : QString();
        }
        QMetaObject::invokeMethod(qApp, [self, generation, path, status, text, inContext] {
            if (!self)
                return;
            --self->m_pending;
            if (generation != self->m_generation)
                return;
            for (auto& e : self->m_entries)
                if (e.path == path) {
                    e.status = status;
                    e.report = text;
                    e.inContext = inContext;
                }
            self->rebuild();
            // The request now carries (or drops) the reference clip.
            if (inContext)
                emit self->changed();
        });
    });
}

void LoraPanel::rebuild()
{
    while (auto* item = m_rows->takeAt(0)) {
        if (auto* w = item->widget())
            w->deleteLater();
        delete item;
    }
    m_empty->setVisible(m_entries.isEmpty());
    for (int i = 0; i < m_entries.size(); ++i) {
        const auto& e = m_entries[i];
        auto* row = new QWidget;
        row->setObjectName(QStringLiteral("loraRow%1").arg(i));
        auto* l = new QVBoxLayout(row);
        l->setContentsMargins(0, 0, 0, 0);
        l->setSpacing(2);
        auto* top = new QHBoxLayout;
        auto* name = new QLabel(QFileInfo(e.path).fileName());
        // A long file name gives way rather than widening the page.
        name->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
        name->setMinimumWidth(80);
        name->setToolTip(e.path + (e.report.isEmpty() ? QString() : QStringLiteral("\n\n") + e.report));
        auto* strength = new QDoubleSpinBox;
        strength->setObjectName(QStringLiteral("loraStrength%1").arg(i));
        strength->setRange(-5, 5);
        strength->setSingleStep(0.05);
        strength->setDecimals(2);
        strength->setValue(e.strength);
        strength->setToolTip(tr("Strength (1 = as trained; negative pushes away from it)"));
        auto* remove = new QPushButton(tr("Remove"));
        remove->setObjectName(QStringLiteral("loraRemove%1").arg(i));
        top->addWidget(name, 1);
        top->addWidget(strength);
        top->addWidget(remove);
        l->addLayout(top);
        auto* status = new QLabel(e.status);
        status->setObjectName(QStringLiteral("loraStatus%1").arg(i));
        status->setWordWrap(true);
        status->setStyleSheet(QStringLiteral("color:%1").arg(colourOf(e.status)));
        status->setToolTip(e.report);
        l->addWidget(status);
        if (e.inContext)
            l->addLayout(referenceRow());
        m_rows->addWidget(row);
        connect(strength, &QDoubleSpinBox::valueChanged, this, [this, i](double v) { setStrength(i, v); });
        connect(remove, &QPushButton::clicked, this, [this, i] { removeLora(i); });
    }
}

QLayout* LoraPanel::referenceRow()
{
    auto* row = new QHBoxLayout;
    auto* note = new QLabel;
    note->setObjectName(QStringLiteral("referenceNote"));
    note->setWordWrap(true);
    note->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    if (m_referencePath.isEmpty()) {
        note->setText(tr("An IC-LoRA: it follows a reference clip (the depth, pose or edge video of the motion). Choose one."));
        note->setStyleSheet(QStringLiteral("color:#e8c070"));
    } else {
        note->setText(tr("Follows %1 (frame by frame, from its start)").arg(QFileInfo(m_referencePath).fileName()));
        note->setToolTip(m_referencePath);
    }
    auto* strength = new QDoubleSpinBox;
    strength->setObjectName(QStringLiteral("referenceStrength"));
    strength->setRange(0, 1);
    strength->setSingleStep(0.05);
    strength->setDecimals(2);
    strength->setValue(m_referenceStrength);
    strength->setToolTip(tr("How closely the video follows the reference clip (1: exactly)"));
    strength->setEnabled(!m_referencePath.isEmpty());
    auto* choose = new QPushButton(tr("Reference clip…"));
    choose->setObjectName(QStringLiteral("chooseReference"));
    auto* clear = new QPushButton(tr("Clear"));
    clear->setObjectName(QStringLiteral("clearReference"));
    clear->setEnabled(!m_referencePath.isEmpty());
    row->addWidget(note, 1);
    row->addWidget(strength);
    row->addWidget(choose);
    row->addWidget(clear);
    connect(strength, &QDoubleSpinBox::valueChanged, this, [this](double v) {
        if (m_referenceStrength != v) {
            m_referenceStrength = v;
            emit changed();
        }
    });
    connect(choose, &QPushButton::clicked, this, [this] {
        const auto file = QFileDialog::getOpenFileName(
            this, tr("Reference clip"), QString(), tr("Videos (*.mp4 *.mov *.mkv *.webm *.avi *.ts);;All files (*)"));
        if (!file.isEmpty())
            setReference(file, m_referenceStrength);
    });
    connect(clear, &QPushButton::clicked, this, [this] { clearReference(); });
    return row;
}

}  // namespace vireo::ui
