#include "ui/theme.h"

#include <QAbstractSpinBox>
#include <QApplication>
#include <QComboBox>
#include <QEvent>
#include <QPalette>
#include <QStyleFactory>
#include <QWidget>

namespace vireo::ui {

namespace {

bool editsUnderTheWheel(QObject* o)
{
    return qobject_cast<QAbstractSpinBox*>(o) || qobject_cast<QComboBox*>(o);
}

class WheelGuard : public QObject {
public:
    using QObject::QObject;

    static void adopt(QWidget* w)
    {
        // Qt focuses a WheelFocus widget under the wheel before any filter sees the event, so
        // the policy itself must leave the wheel out.
        if (w->focusPolicy() == Qt::WheelFocus)
            w->setFocusPolicy(Qt::StrongFocus);
    }

protected:
    bool eventFilter(QObject* o, QEvent* e) override
    {
        if (e->type() == QEvent::Polish && editsUnderTheWheel(o)) {
            adopt(static_cast<QWidget*>(o));
        } else if (e->type() == QEvent::Wheel && editsUnderTheWheel(o) && !static_cast<QWidget*>(o)->hasFocus()) {
            // Handled here but not accepted: Qt hands the event on to the parents, up to the
            // scroll area that moves the page.
            e->ignore();
            return true;
        }
        return false;
    }
};

}  // namespace

void guardWheelEdits(QApplication& app)
{
    const auto name = QStringLiteral("vireo-wheel-guard");
    if (app.findChild<QObject*>(name, Qt::FindDirectChildrenOnly))
        return;
    auto* guard = new WheelGuard(&app);
    guard->setObjectName(name);
    app.installEventFilter(guard);
    for (auto* w : QApplication::allWidgets())
        if (editsUnderTheWheel(w))
            WheelGuard::adopt(w);
}

void applyStudioTheme(QApplication& app)
{
    guardWheelEdits(app);
    app.setStyle(QStyleFactory::create(QStringLiteral("Fusion")));
    const QColor window(0x1d, 0x20, 0x25);
    const QColor base(0x16, 0x18, 0x1c);
    const QColor alternate(0x22, 0x26, 0x2c);
    const QColor text(0xe6, 0xe8, 0xeb);
    const QColor dimText(0x8b, 0x92, 0x9c);
    const QColor button(0x2a, 0x2e, 0x35);
    const QColor accent(0x3d, 0xa8, 0x7a);  // vireo green

    QPalette p;
    p.setColor(QPalette::Window, window);
    p.setColor(QPalette::WindowText, text);
    p.setColor(QPalette::Base, base);
    p.setColor(QPalette::AlternateBase, alternate);
    p.setColor(QPalette::ToolTipBase, QColor(0x2f, 0x34, 0x3b));
    p.setColor(QPalette::ToolTipText, text);
    p.setColor(QPalette::PlaceholderText, dimText);
    p.setColor(QPalette::Text, text);
    p.setColor(QPalette::Button, button);
    p.setColor(QPalette::ButtonText, text);
    p.setColor(QPalette::BrightText, QColor(0xff, 0x6b, 0x6b));
    p.setColor(QPalette::Highlight, accent);
    p.setColor(QPalette::HighlightedText, QColor(0x0b, 0x0d, 0x10));
    p.setColor(QPalette::Link, accent.lighter(130));
    p.setColor(QPalette::Mid, QColor(0x30, 0x35, 0x3c));
    p.setColor(QPalette::Dark, QColor(0x12, 0x14, 0x17));
    p.setColor(QPalette::Disabled, QPalette::Text, dimText);
    // Dimmer than enabled text, still readable on a disabled control (test_mainwindow measures it).
    p.setColor(QPalette::Disabled, QPalette::ButtonText, QColor(0xa0, 0xa7, 0xb0));
    p.setColor(QPalette::Disabled, QPalette::WindowText, dimText);
    app.setPalette(p);

    app.setStyleSheet(QStringLiteral(R"(
QListWidget#navigation { background: #16181c; border: none; padding-top: 12px; font-size: 14px; outline: 0; }
QListWidget#navigation::item { padding: 10px 18px; margin: 2px 8px; border-radius: 6px; color: #b8bec6; }
QListWidget#navigation::item:selected { background: #263a31; color: #e6e8eb; }
QListWidget#navigation::item:hover:!selected { background: #1f2329; }
QLabel#pageTitle { font-size: 22px; font-weight: 600; }
QLabel#pageSubtitle { color: #8b929c; }
QLabel#sectionTitle { font-size: 15px; font-weight: 600; margin-top: 8px; }
QLabel#emptyTitle { font-size: 17px; font-weight: 600; color: #c9ced5; }
QLabel#emptyBody { color: #8b929c; }
QLabel#errorText { color: #ff8080; }
QFrame#card { background: #22262c; border: 1px solid #2c3138; border-radius: 8px; }
QFrame#dropZone { border: 1px dashed #3b424b; border-radius: 8px; }
QFrame#dropZone[dragActive="true"] { border: 1px dashed #3da87a; background: #1c2a24; }
QPushButton { padding: 6px 14px; border-radius: 5px; background: #2a2e35; border: 1px solid #363b43; }
QPushButton:hover:!disabled { background: #323740; }
QPushButton:pressed { background: #25292f; }
QPushButton:disabled { color: #959ca5; background: #24272d; border-color: #2c3036; }
QPushButton#primary, QPushButton[primary="true"] { background: #3da87a; color: #0b0d10; font-weight: 600; border: none; }
QPushButton#primary:hover:!disabled, QPushButton[primary="true"]:hover:!disabled { background: #48b887; }
QPushButton#primary:disabled, QPushButton[primary="true"]:disabled { background: #2a3f35; color: #9aa8a0; }
QLabel#cardTitle { font-weight: 600; color: #c9ced5; }
QTreeWidget, QTableWidget { border: 1px solid #2c3138; border-radius: 6px; }
QTreeView::item { padding: 3px 2px; }
QListWidget#downloadList { font-size: 13px; }
QListWidget#downloadList::item { padding: 8px 10px; border-bottom: 1px solid #262a30; }
QListWidget#downloadList::item:selected { background: #263a31; color: #e6e8eb; }
QProgressBar { border: 1px solid #2c3138; border-radius: 4px; background: #16181c; text-align: center; }
QProgressBar::chunk { background: #3da87a; border-radius: 3px; }
QHeaderView::section { background: #1d2025; border: none; padding: 4px 8px; color: #8b929c; }
QStatusBar { color: #8b929c; }
)"));
}

}  // namespace vireo::ui
