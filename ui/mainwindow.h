#pragma once

#include <QMainWindow>

class QListWidget;
class QStackedWidget;

namespace vireo::ui {

class ModelsPage;

// The studio's frame: a navigation sidebar and one page per area. Remembers its geometry
// and the last page.
class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    enum class Page { Models, Downloads, Generate, Gallery, Settings };

    explicit MainWindow(QWidget* parent = nullptr);

    void showPage(Page page);
    Page currentPage() const;
    ModelsPage* modelsPage() const { return m_models; }
    QListWidget* navigation() const { return m_navigation; }

protected:
    void closeEvent(QCloseEvent* event) override;

private:
    QListWidget* m_navigation;
    QStackedWidget* m_pages;
    ModelsPage* m_models;
};

} // namespace vireo::ui
