#include "ui/dialogs/trustdialog.h"

#include "core/hub/downloadtask.h"
#include "inference/util/format.h"
#include "ui/pages/pagehelpers.h"

#include <QDialogButtonBox>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QTreeWidget>
#include <QVBoxLayout>

namespace vireo::ui {

TrustDialog::TrustDialog(const hub::DownloadTask& task, const QStringList& untrustedRepos, QWidget* parent) : QDialog(parent)
{
    setObjectName(QStringLiteral("trustDialog"));
    setWindowTitle(tr("Allow downloads from %1?").arg(untrustedRepos.join(QStringLiteral(", "))));
    setMinimumWidth(620);
    auto* layout = new QVBoxLayout(this);
    QStringList publishers;
    for (const auto& r : untrustedRepos)
        publishers << r.section(QLatin1Char('/'), 0, 0);
    publishers.removeDuplicates();
    auto* text = new QLabel(
        tr("<b>%1</b> is published by <b>%2</b>, which is not one of the catalog's publishers. "
           "Vireo only reads weights (safetensors, GGUF) and never runs code from a model, "
           "but the files are whatever the publisher uploaded. Download them only if you trust the publisher.")
            .arg(untrustedRepos.join(QStringLiteral(", ")).toHtmlEscaped(), publishers.join(QStringLiteral(", ")).toHtmlEscaped()));
    text->setWordWrap(true);
    layout->addWidget(text);

    auto* files = new QTreeWidget;
    files->setObjectName(QStringLiteral("trustFiles"));
    files->setColumnCount(3);
    files->setHeaderLabels({tr("Repo"), tr("File"), tr("Size")});
    files->setRootIsDecorated(false);
    files->header()->setSectionResizeMode(1, QHeaderView::Stretch);
    std::uint64_t total = 0;
    int count = 0;
    for (const auto& plan : task.plans()) {
        if (!untrustedRepos.contains(QString::fromStdString(plan.repo)))
            continue;
        for (const auto& f : plan.files) {
            new QTreeWidgetItem(files,
                {QString::fromStdString(plan.repo), QString::fromStdString(f.file.path),
                    QString::fromStdString(vireo::humanBytes(f.file.size))});
            total += f.file.size;
            ++count;
        }
    }
    layout->addWidget(files, 1);
    auto* summary =
        new QLabel(tr("%1, %2 in total.").arg(countOf(count, tr("file"), tr("files")), QString::fromStdString(vireo::humanBytes(total))));
    summary->setObjectName(QStringLiteral("pageSubtitle"));
    layout->addWidget(summary);

    auto* buttons = new QDialogButtonBox;
    auto* trust = buttons->addButton(tr("Trust and allow downloads"), QDialogButtonBox::AcceptRole);
    trust->setObjectName(QStringLiteral("trustButton"));
    auto* cancel = buttons->addButton(QDialogButtonBox::Cancel);
    cancel->setDefault(true);
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    layout->addWidget(buttons);
}

}  // namespace vireo::ui
