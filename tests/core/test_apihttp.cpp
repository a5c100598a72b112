// The local API's HTTP rules as pure functions (RFC 9110's Range and If-Range, ETag lists,
// percent-decoding, multipart bodies, constant-time comparison) and its job journal's crash
// behaviour: a torn last line is skipped, the folded state survives a reopen.
#include "core/api/http.h"
#include "core/api/jobjournal.h"

#include <QTemporaryDir>
#include <QTest>

#include <fstream>

using namespace vireo::api;
using Kind = RangeDecision::Kind;

class TestApiHttp : public QObject {
    Q_OBJECT
private slots:
    void rangeFollowsRfc9110();
    void ifRangeAndEtags();
    void targetsDecodeStrictly();
    void multipartAsTheOpenAiClientSendsIt();
    void multipartRefusesMalformedBodies();
    void errorsHaveOpenAiShape();
    void tokensCompareWhole();
    void journalSurvivesATornLine();
};

void TestApiHttp::rangeFollowsRfc9110()
{
    const std::string tag = "\"abc\"";
    auto d = decideRange("GET", "bytes=0-499", "", tag, 10000);
    QCOMPARE(d.kind, Kind::Partial);
    QCOMPARE(d.first, 0);
    QCOMPARE(d.length, 500);
    d = decideRange("GET", "bytes=9500-", "", tag, 10000);  // to the end
    QCOMPARE(d.first, 9500);
    QCOMPARE(d.length, 500);
    d = decideRange("GET", "bytes=-500", "", tag, 10000);  // a suffix
    QCOMPARE(d.first, 9500);
    QCOMPARE(d.length, 500);
    d = decideRange("GET", "bytes=-20000", "", tag, 10000);  // a suffix longer than the file: all of it
    QCOMPARE(d.kind, Kind::Partial);
    QCOMPARE(d.first, 0);
    QCOMPARE(d.length, 10000);
    d = decideRange("GET", "bytes=9000-99999", "", tag, 10000);  // a last byte past the end is clipped
    QCOMPARE(d.length, 1000);
    QCOMPARE(decideRange("GET", "bytes=10000-", "", tag, 10000).kind, Kind::Unsatisfiable);
    QCOMPARE(decideRange("GET", "bytes=-0", "", tag, 10000).kind, Kind::Unsatisfiable);
    QCOMPARE(decideRange("GET", "bytes=0-", "", tag, 0).kind, Kind::Unsatisfiable);
    // Ignored: another unit, another method, a malformed or inverted spec, several ranges.
    for (const auto& [method, range] : std::vector<std::pair<std::string, std::string>>{{"GET", "items=0-5"}, {"POST", "bytes=0-5"},
             {"GET", "bytes=5-1"}, {"GET", "bytes=a-b"}, {"GET", "bytes=0-1,4-5"}, {"GET", "bytes=+1-5"}, {"GET", "bytes"},
             {"GET", "bytes=99999999999999999999999-"}}) {
        const auto r = decideRange(method, range, "", tag, 10000);
        QVERIFY2(r.kind == Kind::Full && r.length == 10000, (method + " " + range).c_str());
    }
    QCOMPARE(decideRange("GET", "BYTES = 0-0", "", tag, 10).length, 1);  // the unit is case-insensitive
}

void TestApiHttp::ifRangeAndEtags()
{
    const std::string tag = "\"abc\"";
    QCOMPARE(decideRange("GET", "bytes=0-9", tag, tag, 100).kind, Kind::Partial);
    QCOMPARE(decideRange("GET", "bytes=0-9", "\"other\"", tag, 100).kind, Kind::Full);
    QCOMPARE(decideRange("GET", "bytes=0-9", "W/\"abc\"", tag, 100).kind, Kind::Full);  // weak never matches If-Range
    QCOMPARE(decideRange("GET", "bytes=0-9", "Tue, 01 Dec 2026 10:00:00 GMT", tag, 100).kind, Kind::Full);
    QVERIFY(noneMatch("\"x\", \"abc\"", tag));
    QVERIFY(noneMatch("W/\"abc\"", tag));
    QVERIFY(noneMatch("*", tag));
    QVERIFY(!noneMatch("\"abcd\"", tag));
    QVERIFY(!noneMatch("", tag));
}

void TestApiHttp::targetsDecodeStrictly()
{
    auto t = splitTarget("/v1/videos/a%20b?limit=5&order=desc&q=a+b&empty");
    QVERIFY(t);
    QCOMPARE(t->first, std::string("/v1/videos/a b"));
    QCOMPARE(t->second.at("limit"), std::string("5"));
    QCOMPARE(t->second.at("q"), std::string("a b"));
    QCOMPARE(t->second.at("empty"), std::string());
    QVERIFY(!splitTarget("http://evil/v1"));  // only origin-form
    QVERIFY(!splitTarget("/a%2"));
    QVERIFY(!splitTarget("/a%zz"));
    QVERIFY(!splitTarget("/a%00b"));  // a NUL never reaches a route
    QVERIFY(!splitTarget("/a?x=%"));
    QCOMPARE(percentDecode("a+b", false).value(), std::string("a+b"));
    QCOMPARE(percentDecode("%2e%2E%2f", false).value(), std::string("../"));
}

void TestApiHttp::multipartAsTheOpenAiClientSendsIt()
{
    const std::string body = "--b0und\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\na fox\r\n"
                             "--b0und\r\nContent-Disposition: form-data; name=\"seconds\"\r\n\r\n4\r\n"
                             "--b0und\r\nContent-Disposition: form-data; name=\"input_reference\"; filename=\"in.png\"\r\n"
                             "Content-Type: image/png\r\n\r\n\x89PNG\r\n--not-the-boundary\r\n"
                             "--b0und--\r\n";
    std::string error;
    auto parts = parseMultipart("multipart/form-data; boundary=b0und", body, &error);
    QVERIFY2(parts, error.c_str());
    QCOMPARE(parts->size(), std::size_t(3));  // in the order sent
    QCOMPARE(parts->at(0).name, std::string("prompt"));
    QCOMPARE(parts->at(0).data, std::string("a fox"));
    QCOMPARE(parts->at(1).data, std::string("4"));
    QCOMPARE(parts->at(2).name, std::string("input_reference"));
    QCOMPARE(parts->at(2).filename, std::string("in.png"));
    QCOMPARE(parts->at(2).contentType, std::string("image/png"));
    QCOMPARE(parts->at(2).data, std::string("\x89PNG\r\n--not-the-boundary"));
    // A quoted boundary, as some clients send it.
    QVERIFY(parseMultipart("multipart/form-data; boundary=\"b0und\"", body, &error));
}

void TestApiHttp::multipartRefusesMalformedBodies()
{
    std::string error;
    QVERIFY(!parseMultipart("multipart/form-data", "--x\r\n", &error));  // no boundary
    QVERIFY(!parseMultipart("multipart/form-data; boundary=" + std::string(71, 'b'), "", &error));
    QVERIFY(!parseMultipart("multipart/form-data; boundary=x", "no delimiter at all", &error));
    QVERIFY(!parseMultipart("multipart/form-data; boundary=x", "--x\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\ncut", &error));
    QVERIFY(error.find("never ends") != std::string::npos);
    QVERIFY(!parseMultipart("multipart/form-data; boundary=x", "--x\r\nContent-Type: text/plain\r\n\r\nv\r\n--x--", &error));
    QVERIFY(error.find("no field name") != std::string::npos);
    std::string many;
    for (int i = 0; i < 40; ++i)
        many += "--x\r\nContent-Disposition: form-data; name=\"f" + std::to_string(i) + "\"\r\n\r\nv\r\n";
    many += "--x--";
    QVERIFY(!parseMultipart("multipart/form-data; boundary=x", many, &error));
    QVERIFY(error.find("more than 32 parts") != std::string::npos);
}

void TestApiHttp::errorsHaveOpenAiShape()
{
    const auto r = errorResponse(400, "'size' must be WIDTHxHEIGHT", "size", "bad_size");
    QCOMPARE(r.status, 400);
    QCOMPARE(r.body,
        std::string(
            R"({"error":{"code":"bad_size","message":"'size' must be WIDTHxHEIGHT","param":"size","type":"invalid_request_error"}})"));
    QCOMPARE(errorType(429), std::string("rate_limit_error"));
    QCOMPARE(errorType(401), std::string("authentication_error"));
}

void TestApiHttp::tokensCompareWhole()
{
    QVERIFY(constantTimeEquals("vireo-abcdef", "vireo-abcdef"));
    QVERIFY(!constantTimeEquals("vireo-abcdef", "vireo-abcdeg"));
    QVERIFY(!constantTimeEquals("vireo-abcdef", "vireo-abcde"));
    QVERIFY(!constantTimeEquals("vireo-abcdef", ""));
    QVERIFY(!constantTimeEquals(std::string("a\0b", 3), std::string("a\0c", 3)));
}

void TestApiHttp::journalSurvivesATornLine()
{
    QTemporaryDir dir;
    const auto file = dir.filePath(QStringLiteral("jobs.jsonl"));
    {
        JobJournal::Contents c;
        auto j = JobJournal::open(file, &c);
        QVERIFY(j);
        QCOMPARE(c.jobs.size(), std::size_t(0));
        QVERIFY((*j)->record({{"id", "video_a"}, {"status", "queued"}}).ok());
        QVERIFY((*j)->record({{"id", "video_b"}, {"status", "queued"}}).ok());
        QVERIFY((*j)->record({{"id", "video_a"}, {"status", "in_progress"}}).ok());
        QVERIFY((*j)->record({{"id", "video_c"}, {"status", "completed"}}).ok());
        QVERIFY((*j)->forget("video_c").ok());
    }
    {
        // A crash in the middle of a write leaves half a line.
        std::ofstream out(file.toStdString(), std::ios::app | std::ios::binary);
        out << R"({"id": "video_b", "status": "comp)";
    }
    JobJournal::Contents c;
    auto j = JobJournal::open(file, &c);
    QVERIFY(j);
    QCOMPARE(c.damagedLines, 1);
    QCOMPARE(c.jobs.size(), std::size_t(2));
    QCOMPARE(c.jobs[0]["id"].get<std::string>(), std::string("video_a"));
    QCOMPARE(c.jobs[0]["status"].get<std::string>(), std::string("in_progress"));
    QCOMPARE(c.jobs[1]["status"].get<std::string>(), std::string("queued"));
    // The reopen rewrote the file folded: the torn line is gone, the order kept.
    JobJournal::Contents again;
    j->reset();
    auto k = JobJournal::open(file, &again, 1);
    QVERIFY(k);
    QCOMPARE(again.damagedLines, 0);
    QCOMPARE(again.jobs.size(), std::size_t(2));
    // Finished jobs beyond the limit are dropped oldest first; unfinished ones always stay.
    QVERIFY((*k)->record({{"id", "video_d"}, {"status", "completed"}}).ok());
    QVERIFY((*k)->record({{"id", "video_e"}, {"status", "failed"}}).ok());
    k->reset();
    JobJournal::Contents trimmed;
    auto m = JobJournal::open(file, &trimmed, 1);
    QVERIFY(m);
    QCOMPARE(trimmed.jobs.size(), std::size_t(3));
    QCOMPARE(trimmed.jobs.back()["id"].get<std::string>(), std::string("video_e"));
    // A second server on the same journal would run its queued jobs again: refused while held.
    JobJournal::Contents second;
    auto other = JobJournal::open(file, &second);
    QVERIFY(!other);
    QCOMPARE(other.error().code, vireo::ErrorCode::PermissionDenied);
    QVERIFY(other.error().message.find("in use by another Vireo server") != std::string::npos);
    m->reset();
    QVERIFY(JobJournal::open(file, &second));
}

QTEST_GUILESS_MAIN(TestApiHttp)
#include "test_apihttp.moc"
