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

#include <cmath>

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
        // Every area's icon stands out from the sidebar (Fusion's play triangle is drawn near
        // black, for light themes): its visible pixels have a quarter of the text's contrast.
        const QColor background = window.navigation()->palette().color(QPalette::Base);
        const QColor text = window.navigation()->palette().color(QPalette::Text);
        for (int i = 0; i < window.navigation()->count(); ++i) {
            const QImage icon = window.navigation()->item(i)->icon().pixmap(18, 18).toImage().convertToFormat(QImage::Format_ARGB32);
            double sum = 0, weight = 0;
            for (int y = 0; y < icon.height(); ++y)
                for (int x = 0; x < icon.width(); ++x) {
                    const QColor c = icon.pixelColor(x, y);
                    sum += c.alphaF() * qGray(c.rgb());
                    weight += c.alphaF();
                }
            QVERIFY2(weight > 10, qPrintable(window.navigation()->item(i)->text()));
            const double grey = sum / weight;
            QVERIFY2(std::abs(grey - qGray(background.rgb())) >= 0.25 * std::abs(qGray(text.rgb()) - qGray(background.rgb())),
                qPrintable(QStringLiteral("%1: icon grey %2, text %3, sidebar %4").arg(window.navigation()->item(i)->text())
                               .arg(grey).arg(qGray(text.rgb())).arg(qGray(background.rgb()))));
        }
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
