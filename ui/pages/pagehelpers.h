#pragma once

#include <QString>

class QVBoxLayout;
class QWidget;

namespace vireo::ui {

// Title and one line of context at the top of a page.
void addPageHeader(QVBoxLayout* layout, const QString& title, const QString& subtitle);

// An honest empty state: what will appear here and what the user can do now.
QWidget* makeEmptyState(const QString& title, const QString& body, QWidget* parent = nullptr);

} // namespace vireo::ui
