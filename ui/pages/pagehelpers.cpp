#include "ui/pages/pagehelpers.h"

#include <QLabel>
#include <QVBoxLayout>

namespace vireo::ui {

QString countOf(qint64 n, const QString& one, const QString& many)
{
    return QString::number(n) + QLatin1Char(' ') + (n == 1 ? one : many);
}

void addPageHeader(QVBoxLayout* layout, const QString& title, const QString& subtitle)
{
    auto* titleLabel = new QLabel(title);
    titleLabel->setObjectName(QStringLiteral("pageTitle"));
    auto* subtitleLabel = new QLabel(subtitle);
    subtitleLabel->setObjectName(QStringLiteral("pageSubtitle"));
    subtitleLabel->setWordWrap(true);
    layout->addWidget(titleLabel);
    layout->addWidget(subtitleLabel);
    layout->addSpacing(12);
}

QWidget* makeEmptyState(const QString& title, const QString& body, QWidget* parent)
{
    auto* box = new QWidget(parent);
    auto* layout = new QVBoxLayout(box);
    layout->addStretch(1);
    auto* titleLabel = new QLabel(title);
    titleLabel->setObjectName(QStringLiteral("emptyTitle"));
    titleLabel->setAlignment(Qt::AlignCenter);
    auto* bodyLabel = new QLabel(body);
    bodyLabel->setObjectName(QStringLiteral("emptyBody"));
    bodyLabel->setAlignment(Qt::AlignCenter);
    bodyLabel->setWordWrap(true);
    bodyLabel->setMaximumWidth(520);
    layout->addWidget(titleLabel, 0, Qt::AlignHCenter);
    layout->addWidget(bodyLabel, 0, Qt::AlignHCenter);
    layout->addStretch(2);
    return box;
}

}  // namespace vireo::ui
