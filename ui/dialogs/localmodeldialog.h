#pragma once

#include <QDialog>
#include <QStringList>

class QDialogButtonBox;
class QLabel;
class QLineEdit;
class QListWidget;

namespace vireo::ui {

// One dialog for a model on disk: the model (a file or a folder), the companion files a single
// file or GGUF needs (connectors, VAE, audio VAE), the text encoder folder and the latent
// upsampler. What the files add up to is checked from their headers as they are chosen, and
// Add stays off until they make a model that can run, with what is missing said.
class LocalModelDialog : public QDialog {
    Q_OBJECT
public:
    explicit LocalModelDialog(QWidget* parent = nullptr);

    // The model resolver's local entry ("path|companion|te=...|up=..."), once accepted.
    QString entry() const;
    // Sets the model path as the user would pick it (tests, drops).
    void setModelPath(const QString& path);
    void addCompanion(const QString& path);
    void setTextEncoder(const QString& path);
    void setUpsampler(const QString& path);

private:
    void check();
    QString startFolder() const;
    void remember(const QString& path);

    QLineEdit* m_model;
    QListWidget* m_companions;
    QLineEdit* m_textEncoder;
    QLineEdit* m_upsampler;
    QLabel* m_verdict;
    QDialogButtonBox* m_buttons;
};

}  // namespace vireo::ui
