#pragma once

// The tiny LTX-2 checkpoints of the pipeline fixture as engine jobs, for the runtime's tests.

#include "core/runtime/engine.h"

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QString>
#include <QTest>

namespace vireo::test {

inline QString ltxFixtures()
{
    return qEnvironmentVariable("VIREO_FIXTURES_ROOT") + QStringLiteral("/ltx2pipeline");
}

inline runtime::ModelRef tinyModel(const QString& version = QStringLiteral("v23"))
{
    runtime::ModelRef m;
    m.key = QStringLiteral("local:tiny-") + version;
    m.title = QStringLiteral("tiny LTX ") + version;
    m.plan.modelPaths = {QString(ltxFixtures() + QLatin1Char('/') + version + QStringLiteral("/diffusers")).toStdString()};
    m.plan.device = "cpu";
    return m;
}

inline facade::GenerateRequest smallRequest(std::int64_t size = 64, std::int64_t frames = 9)
{
    facade::GenerateRequest r;
    r.prompt = "a fox in the snow";
    r.width = size;
    r.height = size;
    r.frames = frames;
    r.seed = 3;
    return r;
}

inline bool finished(runtime::JobState s)
{
    return s == runtime::JobState::Done || s == runtime::JobState::Failed || s == runtime::JobState::Cancelled;
}

inline bool waitFinished(runtime::Engine& e, quint64 id, int ms = 120000)
{
    QElapsedTimer t;
    t.start();
    while (t.elapsed() < ms) {
        const auto s = e.job(id);
        if (s && finished(s->state)) {
            // Progress is delivered queued: what the job reported before it finished is
            // handed over now, so a test sees all of it.
            QCoreApplication::processEvents();
            return true;
        }
        QTest::qWait(5);
    }
    return false;
}

}  // namespace vireo::test
