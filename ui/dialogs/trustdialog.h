#pragma once

#include <QDialog>

namespace vireo::hub {
class DownloadTask;
}

namespace vireo::ui {

// Asks before anything is downloaded from a publisher outside the catalog: who publishes
// it, which files would come and how much. The answer is remembered per repo and can be
// revoked in Settings.
class TrustDialog : public QDialog {
    Q_OBJECT
public:
    TrustDialog(const hub::DownloadTask& task, const QStringList& untrustedRepos, QWidget* parent = nullptr);
};

}  // namespace vireo::ui
