#include "tests/ui/studiowindow.h"
#include "tests/ui/uitest.h"
#include "ui/mainwindow.h"
#include "core/gallery/gallery.h"
#include "core/settings/studiosettings.h"
#include "core/studio/studio.h"
#include "ui/pages/generatepage.h"
#include "ui/pages/modelspage.h"
#include "ui/pages/settingspage.h"
#include "ui/theme.h"
#include "core/api/apiservice.h"

#include <QAbstractButton>
#include <QCheckBox>
#include <QLabel>
#include <QSpinBox>
#include <QAbstractSpinBox>
#include <QAccessible>
#include <QApplication>
#include <QComboBox>
#include <QHash>
#include <QFileInfo>
#include <QLineEdit>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSlider>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTableWidget>
#include <QTest>
#include <QTreeWidget>

#include <cmath>
#include <future>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

using vireo::test::saveScreenshot;

namespace {

int freePort()
{
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t n = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
    ::close(fd);
    return ntohs(a.sin_port);
}

// One request to 127.0.0.1:port and the whole answer; empty when nothing answers.
std::string httpExchange(int port, const std::string& request)
{
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    std::string out;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) >= 0) {
        char buffer[4096];
        for (ssize_t got; (got = ::recv(fd, buffer, sizeof buffer, 0)) > 0;)
            out.append(buffer, static_cast<std::size_t>(got));
    }
    ::close(fd);
    return out;
}

}  // namespace
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
        QCOMPARE(labels,
            (QStringList{QStringLiteral("Models"), QStringLiteral("Downloads"), QStringLiteral("Generate"), QStringLiteral("Gallery"),
                QStringLiteral("Settings")}));
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
                qPrintable(QStringLiteral("%1: icon grey %2, text %3, sidebar %4")
                               .arg(window.navigation()->item(i)->text())
                               .arg(grey)
                               .arg(qGray(text.rgb()))
                               .arg(qGray(background.rgb()))));
        }
    }

    // Every page fits every common window size: nothing drawn over anything else or cut off
    // outside a scroll area, and the window takes the size (issue #27: the Generate page was
    // clipped at 1024x700). Run again at 150% scale by the test_mainwindow_scaled entry.
    void everyPageFitsAtEverySize()
    {
        auto owned = vireo::test::openStudioWindow();
        auto& window = *owned;
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        const QList<QSize> sizes{{1024, 700}, {1180, 760}, {1366, 768}, {1920, 1080}, {2560, 1440}};
        const QList<std::pair<MainWindow::Page, QString>> pages{{MainWindow::Page::Models, QStringLiteral("models")},
            {MainWindow::Page::Downloads, QStringLiteral("downloads")}, {MainWindow::Page::Generate, QStringLiteral("generate")},
            {MainWindow::Page::Gallery, QStringLiteral("gallery")}, {MainWindow::Page::Settings, QStringLiteral("settings")}};
        const QString scale =
            qEnvironmentVariableIsEmpty("QT_SCALE_FACTOR") ? QString() : QStringLiteral("-x") + qEnvironmentVariable("QT_SCALE_FACTOR");
        for (const auto& size : sizes) {
            window.resize(size);
            for (const auto& [page, name] : pages) {
                window.showPage(page);
                QTest::qWait(30);
                QVERIFY2(window.width() <= size.width() && window.height() <= size.height(),
                    qPrintable(QStringLiteral("%1 at %2x%3: the window stays %4x%5 (its minimum is %6x%7)")
                                   .arg(name)
                                   .arg(size.width())
                                   .arg(size.height())
                                   .arg(window.width())
                                   .arg(window.height())
                                   .arg(window.minimumSizeHint().width())
                                   .arg(window.minimumSizeHint().height())));
                const auto problems = vireo::test::layoutProblems(&window);
                QVERIFY2(problems.isEmpty(),
                    qPrintable(QStringLiteral("%1 at %2x%3%4:\n%5")
                                   .arg(name)
                                   .arg(size.width())
                                   .arg(size.height())
                                   .arg(scale, problems.join(QLatin1Char('\n')))));
                if (size == sizes.first() || size == sizes.last())
                    saveScreenshot(&window, QStringLiteral("%1-%2x%3%4.png").arg(name).arg(size.width()).arg(size.height()).arg(scale));
            }
        }
    }

    // Screen readers can name every control (its text, the label of its form row, or an
    // accessible name), Tab reaches every one, and a disabled control stays readable: its text at least 3:1 against its
    // background, measured on the pixels drawn (issue #27).
    void controlsHaveNamesAndDisabledOnesStayReadable()
    {
        auto owned = vireo::test::openStudioWindow();
        auto& window = *owned;
        window.resize(1366, 768);
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        QStringList unnamed;
        for (const auto page : {MainWindow::Page::Models, MainWindow::Page::Downloads, MainWindow::Page::Generate,
                 MainWindow::Page::Gallery, MainWindow::Page::Settings}) {
            window.showPage(page);
            QTest::qWait(30);
            for (auto* w : window.findChildren<QWidget*>()) {
                if (!w->isVisible())
                    continue;
                // A spin box's or combo box's own line edit is named through its owner.
                const bool inner = qobject_cast<QLineEdit*>(w)
                    && (qobject_cast<QAbstractSpinBox*>(w->parentWidget()) || qobject_cast<QComboBox*>(w->parentWidget()));
                const bool control = !inner
                    && (qobject_cast<QAbstractButton*>(w) || qobject_cast<QLineEdit*>(w) || qobject_cast<QAbstractSpinBox*>(w)
                        || qobject_cast<QComboBox*>(w) || qobject_cast<QPlainTextEdit*>(w) || qobject_cast<QSlider*>(w));
                if (!control)
                    continue;
                // Reachable without a mouse: Tab stops at every control.
                if (!(w->focusPolicy() & Qt::TabFocus))
                    unnamed << QStringLiteral("%1 is not reached by Tab").arg(vireo::test::describe(w));
                auto* accessible = QAccessible::queryAccessibleInterface(w);
                if (!accessible || accessible->text(QAccessible::Name).trimmed().isEmpty())
                    unnamed << QStringLiteral("%1: %2").arg(
                        window.currentPage() == page ? QString::number(static_cast<int>(page)) : QString(), vireo::test::describe(w));
            }
        }
        unnamed.removeDuplicates();
        QVERIFY2(unnamed.isEmpty(), qPrintable(unnamed.join(QLatin1Char('\n'))));

        // Disabled buttons: the primary one (Generate with no prompt) and a plain one (Cancel).
        window.showPage(MainWindow::Page::Generate);
        auto* page = window.generatePage();
        for (const char* name : {"generate", "cancel"}) {
            auto* button = page->findChild<QPushButton*>(QString::fromLatin1(name));
            QVERIFY(button && !button->isEnabled());
            const QImage pixels = button->grab().toImage().convertToFormat(QImage::Format_RGB32);
            QHash<QRgb, int> counts;
            for (int y = 0; y < pixels.height(); ++y)
                for (int x = 0; x < pixels.width(); ++x)
                    ++counts[pixels.pixel(x, y)];
            QRgb background = 0;
            for (auto it = counts.begin(); it != counts.end(); ++it)
                if (it.value() > counts.value(background))
                    background = it.key();
            auto luminance = [](QRgb c) {
                auto channel = [](int v) {
                    const double s = v / 255.0;
                    return s <= 0.03928 ? s / 12.92 : std::pow((s + 0.055) / 1.055, 2.4);
                };
                return 0.2126 * channel(qRed(c)) + 0.7152 * channel(qGreen(c)) + 0.0722 * channel(qBlue(c));
            };
            double best = 1;
            for (auto it = counts.begin(); it != counts.end(); ++it) {
                if (it.value() < 4)  // a glyph's body, not an antialiased edge pixel
                    continue;
                const double a = luminance(it.key()), b = luminance(background);
                best = std::max(best, (std::max(a, b) + 0.05) / (std::min(a, b) + 0.05));
            }
            QVERIFY2(best >= 3.0,
                qPrintable(QStringLiteral("disabled %1: text at %2:1 against its background")
                               .arg(QString::fromLatin1(name))
                               .arg(best, 0, 'f', 2)));
        }
    }

    // The outputs folder the README names is a setting (issue #27): chosen, created, watched by
    // the gallery; a folder that cannot be written is refused with the reason.
    void settingsChooseTheOutputsFolder()
    {
        auto owned = vireo::test::openStudioWindow();
        auto& window = *owned;
        window.showPage(MainWindow::Page::Settings);
        auto* settings = window.studio()->settings();
        auto* edit = window.settingsPage()->findChild<QLineEdit*>(QStringLiteral("outputsEdit"));
        QVERIFY(edit);
        QCOMPARE(edit->text(), settings->outputsFolder());
        QTemporaryDir dir;
        const QString folder = dir.filePath(QStringLiteral("renders"));
        edit->setText(folder);
        emit edit->editingFinished();
        QCOMPARE(settings->outputsFolder(), folder);
        QVERIFY(QFileInfo(folder).isDir());
        QTRY_COMPARE(window.studio()->gallery()->outputsFolder(), folder);
        edit->setText(QStringLiteral("/proc/vireo-outputs"));
        emit edit->editingFinished();
        QCOMPARE(settings->outputsFolder(), folder);
        QCOMPARE(edit->text(), folder);
        settings->setOutputsFolder(QString());
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

    // Settings -> Local API serves the running studio: the switch starts the server on the port
    // the page shows, a client gets the models, and switching off closes the port.
    void settingsServeTheLocalApi()
    {
        auto owned = vireo::test::openStudioWindow();
        auto& window = *owned;
        auto* page = window.settingsPage();
        QVERIFY(!window.apiService());
        QVERIFY(page->apiStatus()->text().startsWith(QStringLiteral("Off")));
        const int port = freePort();
        page->apiPortBox()->setValue(port);
        page->apiBox()->setChecked(true);
        QVERIFY(window.apiService() && window.apiService()->running());
        QVERIFY2(
            page->apiStatus()->text().contains(QStringLiteral("http://127.0.0.1:%1").arg(port)), qPrintable(page->apiStatus()->text()));
        QCOMPARE(window.settings()->apiPort(), port);
        // The routes run on this (the studio's) thread: the exchange runs on another while this
        // one keeps its event loop turning.
        auto answer = std::async(std::launch::async, [port] {
            return httpExchange(
                port, "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) + "\r\nConnection: close\r\n\r\n");
        });
        QTRY_VERIFY_WITH_TIMEOUT(answer.wait_for(std::chrono::seconds(0)) == std::future_status::ready, 20000);
        const auto text = answer.get();
        QVERIFY2(text.rfind("HTTP/1.1 200", 0) == 0 && text.find("\"object\":\"list\"") != std::string::npos, text.c_str());
        page->apiBox()->setChecked(false);
        QVERIFY(!window.apiService());
        QVERIFY(httpExchange(port, "GET / HTTP/1.1\r\n\r\n").empty());  // nothing listens any more
    }

    // Settings -> Devices: every device of the box with its memory, what it holds and its queue,
    // and the default device, saved at once.
    void settingsListTheDevicesAndTheDefault()
    {
        auto owned = vireo::test::openStudioWindow();
        auto& window = *owned;
        auto* page = window.settingsPage();
        page->refreshDevices();
        auto* table = page->devicesTable();
        QVERIFY(table->rowCount() >= 1);
        QCOMPARE(table->item(0, 0)->text(), QStringLiteral("cpu"));
        QVERIFY2(table->item(0, 2)->text().endsWith(QStringLiteral("GB available")), qPrintable(table->item(0, 2)->text()));
        QCOMPARE(table->item(0, 3)->text(), QStringLiteral("nothing"));
        QCOMPARE(table->item(0, 4)->text(), QStringLiteral("0"));
        for (int r = 1; r < table->rowCount(); ++r)
            QVERIFY(table->item(r, 0)->text().startsWith(QStringLiteral("cuda:")));
        auto* device = page->computeDeviceBox();
        const int cpu = device->findData(QStringLiteral("cpu"));
        QVERIFY(cpu > 0);
        device->setCurrentIndex(cpu);
        QCOMPARE(window.settings()->computeDevice(), QStringLiteral("cpu"));
        device->setCurrentIndex(0);
        QCOMPARE(window.settings()->computeDevice(), QStringLiteral("auto"));
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
