#pragma once

// What the page tests share: the tiny LTX-2.3 checkpoint, widgets by object name, and
// screenshots when VIREO_SCREENSHOT_DIR is set (tests/ui/take_screenshots.sh).

#include <QDir>
#include <QString>
#include <QWidget>
#include <QtGlobal>

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

} // namespace vireo::test
