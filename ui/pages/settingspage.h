#pragma once

#include <QWidget>

namespace vireo::ui {

// Where things live, as the studio resolved them. Read-only in this version: the values
// come from the same environment variables huggingface_hub reads.
class SettingsPage : public QWidget {
    Q_OBJECT
public:
    explicit SettingsPage(QWidget* parent = nullptr);
};

} // namespace vireo::ui
