#pragma once

// What the page tests share: the tiny LTX-2.3 checkpoint, widgets by object name, and
// screenshots when VIREO_SCREENSHOT_DIR is set (tests/ui/take_screenshots.sh).

#include <QAbstractScrollArea>
#include <QDir>
#include <QString>
#include <QStringList>
#include <QWidget>
#include <QtGlobal>

#include <functional>

namespace vireo::test {

inline QString tinyModel()
{
    return qEnvironmentVariable("VIREO_FIXTURES_ROOT") + QStringLiteral("/ltx2pipeline/v23/diffusers");
}

template <typename T>
T* child(QWidget* page, const char* name)
{
    auto* w = page->findChild<T*>(QString::fromLatin1(name));
    if (!w)
        qFatal("no widget %s", name);
    return w;
}

inline void saveScreenshot(QWidget* window, const QString& name)
{
    const auto dir = qEnvironmentVariable("VIREO_SCREENSHOT_DIR");
    if (dir.isEmpty())
        return;
    QDir().mkpath(dir);
    window->grab().save(QDir(dir).filePath(name));
}

inline QString describe(const QWidget* w)
{
    const QString name = w->objectName().isEmpty() ? QString() : QStringLiteral(" '%1'").arg(w->objectName());
    QString text;
    if (const auto* p = w->metaObject()->indexOfProperty("text") >= 0 ? w : nullptr)
        text = p->property("text").toString().left(40);
    return QString::fromLatin1(w->metaObject()->className()) + name + (text.isEmpty() ? QString() : QStringLiteral(" \"%1\"").arg(text));
}

// What a user sees as one control drawn over another or cut off: visible widgets under `root`
// that overlap a visible sibling, or stick out of their parent. Inside a scroll area the content
// may be larger than its viewport (that is what scrolling is for), so only that is allowed.
inline QStringList layoutProblems(QWidget* root)
{
    QStringList problems;
    std::function<void(QWidget*)> visit = [&](QWidget* parent) {
        QList<QWidget*> kids;
        for (auto* o : parent->children())
            if (auto* w = qobject_cast<QWidget*>(o); w && w->isVisible() && !w->isWindow())
                kids << w;
        const auto* area = qobject_cast<const QAbstractScrollArea*>(parent->parentWidget());
        const bool viewport = area && area->viewport() == parent;
        for (int i = 0; i < kids.size(); ++i) {
            const QRect g = kids[i]->geometry();
            if (!viewport && !parent->rect().contains(g))
                problems << QStringLiteral("%1 at %2,%3 %4x%5 sticks out of %6 (%7x%8)")
                                .arg(describe(kids[i]))
                                .arg(g.x())
                                .arg(g.y())
                                .arg(g.width())
                                .arg(g.height())
                                .arg(describe(parent))
                                .arg(parent->width())
                                .arg(parent->height());
            for (int j = i + 1; j < kids.size(); ++j)
                if (g.intersects(kids[j]->geometry()))
                    problems << QStringLiteral(
                        "%1 (%2x%3 at %4, at least %5 wide) overlaps %6 (%7x%8 at %9, at least %10 wide) in %11 (%12 wide)")
                                    .arg(describe(kids[i]))
                                    .arg(g.width())
                                    .arg(g.height())
                                    .arg(g.x())
                                    .arg(kids[i]->minimumSizeHint().width())
                                    .arg(describe(kids[j]))
                                    .arg(kids[j]->width())
                                    .arg(kids[j]->height())
                                    .arg(kids[j]->x())
                                    .arg(kids[j]->minimumSizeHint().width())
                                    .arg(describe(parent))
                                    .arg(parent->width());
        }
        for (auto* w : kids)
            visit(w);
    };
    visit(root);
    return problems;
}

}  // namespace vireo::test
