#include "ui/widgets/videoview.h"

#include <QPainter>
#include <QVideoFrame>
#include <QVideoSink>

namespace vireo::ui {

VideoView::VideoView(QWidget* parent) : QWidget(parent), m_sink(new QVideoSink(this))
{
    setAttribute(Qt::WA_OpaquePaintEvent);
    setMinimumSize(320, 180);
    connect(m_sink, &QVideoSink::videoFrameChanged, this, [this](const QVideoFrame& frame) {
        if (!frame.isValid())
            return;
        m_frame = frame.toImage();
        update();
    });
}

void VideoView::clear()
{
    m_frame = {};
    update();
}

void VideoView::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    p.fillRect(rect(), QColor(8, 9, 11));
    if (m_frame.isNull())
        return;
    p.setRenderHint(QPainter::SmoothPixmapTransform);
    const QSize fitted = m_frame.size().scaled(size(), Qt::KeepAspectRatio);
    p.drawImage(QRect(QPoint((width() - fitted.width()) / 2, (height() - fitted.height()) / 2), fitted), m_frame);
}

} // namespace vireo::ui
