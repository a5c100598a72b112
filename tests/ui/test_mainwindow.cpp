#include "tests/ui/studiowindow.h"
#include "ui/mainwindow.h"
#include "ui/pages/modelspage.h"
#include "ui/theme.h"

#include <QApplication>
#include <QListWidget>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTest>
#include <QTreeWidget>

using vireo::ui::MainWindow;

class TestMainWindow : public QObject {
    Q_OBJECT
private slots:
    void initTestCase()
    {
        QStandardPaths::setTestModeEnabled(true);
        QApplication::setOrganizationName(QStringLiteral("VireoTest"));
        QApplication::setApplicationName(QStringLiteral("vireo-test"));
        QSettings().clear();
        vireo::ui::applyStudioTheme(*qApp);
    }

    void navigationReachesEveryArea()
    {
        auto owned = vireo::test::openStudioWindow();
        auto& window = *owned;
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        QStringList labels;
        for (int i = 0; i < window.navigation()->count(); ++i)
            labels << window.navigation()->item(i)->text();
        QCOMPARE(labels, (QStringList{QStringLiteral("Models"), QStringLiteral("Downloads"), QStringLiteral("Generate"),
                             QStringLiteral("Gallery"), QStringLiteral("Settings")}));
        QTest::keyClick(&window, Qt::Key_3, Qt::ControlModifier);
        QCOMPARE(window.currentPage(), MainWindow::Page::Generate);
        QTest::keyClick(&window, Qt::Key_5, Qt::ControlModifier);
        QCOMPARE(window.currentPage(), MainWindow::Page::Settings);
        window.navigation()->setCurrentRow(0);
        QCOMPARE(window.currentPage(), MainWindow::Page::Models);
    }

    void modelsPageShowsWhatAFileIs()
    {
        auto owned = vireo::test::openStudioWindow();
        auto& window = *owned;
        window.show();
        auto* page = window.modelsPage();
        QSignalSpy done(page, &vireo::ui::ModelsPage::inspectionFinished);
        page->openPath(qEnvironmentVariable("VIREO_FIXTURES_ROOT") + QStringLiteral("/models/ltx23_fp8_lightricks.safetensors"));
        QVERIFY(done.wait(20000));
        QCOMPARE(done.at(0).at(1).toBool(), true);
        auto* tree = page->reportView();
        QVERIFY(tree->isVisible());
        QMap<QString, QString> rows;
        for (int i = 0; i < tree->topLevelItemCount(); ++i)
            rows.insert(tree->topLevelItem(i)->text(0), tree->topLevelItem(i)->text(1));
        QCOMPARE(rows.value(QStringLiteral("Recognized")), QStringLiteral("LTX-2.3 audio-video model"));
        QVERIFY2(rows.value(QStringLiteral("Quantization")).startsWith(QStringLiteral("Scaled FP8, per-tensor")),
            qPrintable(rows.value(QStringLiteral("Quantization"))));
    }

    void modelsPageShowsErrors()
    {
        auto owned = vireo::test::openStudioWindow();
        auto& window = *owned;
        auto* page = window.modelsPage();
        QSignalSpy done(page, &vireo::ui::ModelsPage::inspectionFinished);
        page->openPath(qEnvironmentVariable("VIREO_SOURCE_DIR") + QStringLiteral("/tests/corpus/bad/gguf_bad_magic.gguf"));
        QVERIFY(done.wait(20000));
        QCOMPARE(done.at(0).at(1).toBool(), false);
        QVERIFY2(page->statusText().contains(QStringLiteral("bad magic")), qPrintable(page->statusText()));
        QVERIFY(page->reportView()->isHidden());
    }

    void geometryAndPageAreRemembered()
    {
        {
            auto owned = vireo::test::openStudioWindow();
            auto& window = *owned;
            window.show();
            QVERIFY(QTest::qWaitForWindowExposed(&window));
            window.resize(1010, 690);
            window.showPage(MainWindow::Page::Gallery);
            window.close();
        }
        auto ownedAgain = vireo::test::openStudioWindow();
        auto& again = *ownedAgain;
        again.show();
        QVERIFY(QTest::qWaitForWindowExposed(&again));
        QCOMPARE(again.size(), QSize(1010, 690));
        QCOMPARE(again.currentPage(), MainWindow::Page::Gallery);
    }
};

QTEST_MAIN(TestMainWindow)
#include "test_mainwindow.moc"
