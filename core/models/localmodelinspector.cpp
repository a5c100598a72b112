#include "core/models/localmodelinspector.h"

#include <spdlog/spdlog.h>

namespace vireo::core {

LocalModelInspector::LocalModelInspector(QObject* parent) : QObject(parent)
{
    qRegisterMetaType<vireo::core::ModelReport>();
    m_pool.setMaxThreadCount(1);
}

// Waiting here keeps the worker from posting to a destroyed object; events still queued
// for this object are discarded by Qt when it is deleted.
LocalModelInspector::~LocalModelInspector()
{
    m_pool.waitForDone();
}

void LocalModelInspector::inspect(const QString& path)
{
    const quint64 generation = ++m_generation;
    ++m_pending;
    emit started(path);
    LocalModelInspector* self = this;
    m_pool.start([self, path, generation]() {
        // A throw here would end the process from a pool thread: it fails this inspection.
        Result<ModelReport> result = makeError(ErrorCode::Internal, path.toStdString() + ": inspection stopped on an internal error");
        try {
            result = vireo::inspect::inspectPath(path.toStdString());
        } catch (const std::bad_alloc&) {
            result = makeError(ErrorCode::OutOfMemory, path.toStdString() + ": out of memory while reading the headers");
        } catch (const std::exception& e) {
            result = makeError(ErrorCode::Internal, path.toStdString() + ": inspection stopped on an internal error (" + e.what() + ")");
        } catch (...) {
        }
        auto deliver = [self, path, generation, result = std::move(result)]() {
            --self->m_pending;
            if (generation != self->m_generation)
                return;
            if (result) {
                emit self->finished(path, *result);
            } else {
                spdlog::warn("inspect failed: {}", result.error().message);
                emit self->failed(path, QString::fromStdString(result.error().message));
            }
        };
        QMetaObject::invokeMethod(self, std::move(deliver), Qt::QueuedConnection);
    });
}

}  // namespace vireo::core
