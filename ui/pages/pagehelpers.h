#pragma once

#include <QString>
#include <QtGlobal>

class QVBoxLayout;
class QWidget;

namespace vireo::ui {

// "1 file" / "3 files": the studio ships without a translator, so English plurals are
// chosen here rather than left as "file(s)".
QString countOf(qint64 n, const QString& one, const QString& many);

// Title and one line of context at the top of a page.
void addPageHeader(QVBoxLayout* layout, const QString& title, const QString& subtitle);

// An honest empty state: what will appear here and what the user can do now.
QWidget* makeEmptyState(const QString& title, const QString& body, QWidget* parent = nullptr);

}  // namespace vireo::ui
