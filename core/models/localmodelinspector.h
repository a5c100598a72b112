#pragma once

#include "inference/inspect/modelinspector.h"

#include <QObject>
#include <QString>
#include <QThreadPool>

#include <memory>

namespace vireo::core {

using ModelReport = vireo::inspect::ModelReport;

// Inspects a local file or folder off the GUI thread, with the same code as
// `vireo-cli inspect`. One inspection at a time; a newer request supersedes the older one,
// whose result is dropped.
class LocalModelInspector : public QObject {
    Q_OBJECT
public:
    explicit LocalModelInspector(QObject* parent = nullptr);
    ~LocalModelInspector() override;

    void inspect(const QString& path);
    bool isBusy() const { return m_pending > 0; }

signals:
    void started(const QString& path);
    void finished(const QString& path, const vireo::core::ModelReport& report);
    void failed(const QString& path, const QString& message);

private:
    QThreadPool m_pool;  // owned, so the destructor can wait for a running inspection
    quint64 m_generation = 0;
    int m_pending = 0;
};

}  // namespace vireo::core

Q_DECLARE_METATYPE(vireo::core::ModelReport)
