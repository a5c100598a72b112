#include "ui/models/gallerymodel.h"

#include "core/gallery/gallery.h"

#include <QApplication>
#include <QFileInfo>
#include <QLocale>
#include <QPainter>
#include <QPainterPath>
#include <QSet>

namespace vireo::ui {

GalleryModel::GalleryModel(gallery::Gallery* gallery, QObject* parent) : QAbstractListModel(parent), m_gallery(gallery)
{
    for (const auto& item : m_gallery->items())
        m_ids.append(item.id);
    connect(m_gallery, &gallery::Gallery::itemsChanged, this, &GalleryModel::sync);
    connect(m_gallery, &gallery::Gallery::thumbnailReady, this, [this](qint64 id) {
        if (const auto i = indexOfId(id); i.isValid())
            emit dataChanged(i, i, {Qt::DecorationRole, ThumbnailRole, ProblemRole});
    });
}

void GalleryModel::sync()
{
    QList<qint64> next;
    next.reserve(m_gallery->items().size());
    for (const auto& item : m_gallery->items())
        next.append(item.id);
    if (next == m_ids) {
        // Same rows, fields may differ (missing, a thumbnail problem): views repaint what they show.
        if (!m_ids.isEmpty())
            emit dataChanged(index(0), index(static_cast<int>(m_ids.size()) - 1));
        return;
    }
    // A new output lands at the top, a deleted one leaves a gap: inserts and removals keep the
    // selection and the scroll position where a reset would lose both.
    const QSet<qint64> nextSet(next.begin(), next.end());
    for (int i = static_cast<int>(m_ids.size()) - 1; i >= 0;) {
        if (nextSet.contains(m_ids[i])) {
            --i;
            continue;
        }
        int first = i;
        while (first > 0 && !nextSet.contains(m_ids[first - 1]))
            --first;
        beginRemoveRows({}, first, i);
        m_ids.remove(first, i - first + 1);
        endRemoveRows();
        i = first - 1;
    }
    const QSet<qint64> have(m_ids.begin(), m_ids.end());
    for (int i = 0; i < next.size();) {
        if (i < m_ids.size() && m_ids[i] == next[i]) {
            ++i;
            continue;
        }
        if (have.contains(next[i]))
            break;  // reordered: handled below
        int last = i;
        while (last + 1 < next.size() && !have.contains(next[last + 1]))
            ++last;
        beginInsertRows({}, i, last);
        for (int k = i; k <= last; ++k)
            m_ids.insert(k, next[k]);
        endInsertRows();
        i = last + 1;
    }
    if (m_ids != next) {
        beginResetModel();
        m_ids = next;
        endResetModel();
    } else if (!m_ids.isEmpty()) {
        emit dataChanged(index(0), index(static_cast<int>(m_ids.size()) - 1));
    }
}

int GalleryModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : static_cast<int>(m_ids.size());
}

QModelIndex GalleryModel::indexOfId(qint64 id) const
{
    // The gallery's order is the model's after every sync.
    const int i = m_gallery->indexOf(id);
    return i >= 0 && i < m_ids.size() && m_ids[i] == id ? index(i) : QModelIndex();
}

QStringList GalleryModel::models() const
{
    QStringList out;
    QSet<QString> seen;
    for (const auto& item : m_gallery->items())
        if (!item.modelTitle.isEmpty() && !seen.contains(item.modelTitle)) {
            seen.insert(item.modelTitle);
            out.append(item.modelTitle);
        }
    out.sort(Qt::CaseInsensitive);
    return out;
}

QVariant GalleryModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || index.row() >= m_ids.size())
        return {};
    const int i = m_gallery->indexOf(m_ids[index.row()]);
    if (i < 0)
        return {};
    const auto& item = m_gallery->items()[i];
    switch (role) {
    case Qt::DisplayRole: return item.prompt.isEmpty() ? QFileInfo(item.path).fileName() : item.prompt.simplified();
    case Qt::ToolTipRole: {
        QString tip = item.prompt.isEmpty() ? QFileInfo(item.path).fileName() : item.prompt.left(400);
        tip += QStringLiteral("\n") + QLocale().toString(item.created, QLocale::ShortFormat);
        if (!item.modelTitle.isEmpty())
            tip += QStringLiteral(" · ") + item.modelTitle;
        if (item.missing)
            tip += QStringLiteral("\n") + tr("Missing: %1").arg(item.path);
        else if (!item.problem.isEmpty())
            tip += QStringLiteral("\n") + item.problem;
        return tip;
    }
    case ThumbnailRole:
    case Qt::DecorationRole: return m_gallery->thumbnail(item.id);
    case IdRole: return item.id;
    case PathRole: return item.path;
    case CreatedRole: return item.created;
    case ModelRole: return item.modelTitle;
    case PromptRole: return item.prompt;
    case KindRole: return item.kind;
    case MissingRole: return item.missing;
    case ProblemRole: return item.problem;
    case HasRecipeRole: return item.hasRecipe;
    default: return {};
    }
}

QHash<int, QByteArray> GalleryModel::roleNames() const
{
    auto names = QAbstractListModel::roleNames();
    names.insert(IdRole, "id");
    names.insert(PathRole, "path");
    names.insert(CreatedRole, "created");
    names.insert(ModelRole, "model");
    names.insert(PromptRole, "prompt");
    return names;
}

GalleryFilter::GalleryFilter(QObject* parent) : QSortFilterProxyModel(parent)
{
    setDynamicSortFilter(true);
    sort(0);
}

void GalleryFilter::setText(const QString& text)
{
    if (text.trimmed() == m_text)
        return;
    m_text = text.trimmed();
    invalidateFilter();
}

void GalleryFilter::setModelTitle(const QString& title)
{
    if (title == m_model)
        return;
    m_model = title;
    invalidateFilter();
}

void GalleryFilter::setSince(const QDateTime& since)
{
    if (since == m_since)
        return;
    m_since = since;
    invalidateFilter();
}

void GalleryFilter::setOrder(Order order)
{
    if (order == m_order)
        return;
    m_order = order;
    invalidate();
}

bool GalleryFilter::filterAcceptsRow(int row, const QModelIndex& parent) const
{
    const auto i = sourceModel()->index(row, 0, parent);
    if (!m_model.isEmpty() && i.data(GalleryModel::ModelRole).toString() != m_model)
        return false;
    if (m_since.isValid() && i.data(GalleryModel::CreatedRole).toDateTime() < m_since)
        return false;
    if (m_text.isEmpty())
        return true;
    return i.data(GalleryModel::PromptRole).toString().contains(m_text, Qt::CaseInsensitive)
        || QFileInfo(i.data(GalleryModel::PathRole).toString()).fileName().contains(m_text, Qt::CaseInsensitive);
}

bool GalleryFilter::lessThan(const QModelIndex& left, const QModelIndex& right) const
{
    // The source is newest first; its row breaks ties so equal keys keep that order.
    auto byRow = [&] { return left.row() < right.row(); };
    switch (m_order) {
    case Order::Newest: return byRow();
    case Order::Oldest: return left.row() > right.row();
    case Order::Model: {
        const int c =
            QString::localeAwareCompare(left.data(GalleryModel::ModelRole).toString(), right.data(GalleryModel::ModelRole).toString());
        return c != 0 ? c < 0 : byRow();
    }
    case Order::Prompt: {
        const int c =
            QString::localeAwareCompare(left.data(GalleryModel::PromptRole).toString(), right.data(GalleryModel::PromptRole).toString());
        return c != 0 ? c < 0 : byRow();
    }
    }
    return byRow();
}

void GalleryDelegate::paint(QPainter* painter, const QStyleOptionViewItem& option, const QModelIndex& index) const
{
    painter->save();
    painter->setRenderHint(QPainter::Antialiasing);
    painter->setRenderHint(QPainter::SmoothPixmapTransform);
    const QRect tile = option.rect.adjusted(4, 4, -4, -4);
    const auto& palette = option.palette;
    const bool selected = option.state & QStyle::State_Selected;
    if (selected || (option.state & QStyle::State_MouseOver)) {
        QColor back = selected ? palette.color(QPalette::Highlight) : palette.color(QPalette::Midlight);
        back.setAlpha(selected ? 90 : 60);
        painter->setPen(selected ? QPen(palette.color(QPalette::Highlight), 2) : Qt::NoPen);
        painter->setBrush(back);
        painter->drawRoundedRect(QRectF(tile).adjusted(-2, -2, 2, 2), 8, 8);
    }
    const QRect imageRect(tile.left(), tile.top(), tile.width(), kImageHeight);
    QPainterPath clip;
    clip.addRoundedRect(imageRect, 6, 6);
    painter->setClipPath(clip);
    painter->fillRect(imageRect, QColor(18, 20, 24));
    const QImage image = index.data(GalleryModel::ThumbnailRole).value<QImage>();
    const bool missing = index.data(GalleryModel::MissingRole).toBool();
    const QString problem = index.data(GalleryModel::ProblemRole).toString();
    if (!image.isNull()) {
        const QSize fitted = image.size().scaled(imageRect.size(), Qt::KeepAspectRatio);
        const QRect target(imageRect.center() - QPoint(fitted.width() / 2, fitted.height() / 2), fitted);
        painter->drawImage(target, image);
        if (missing)
            painter->fillRect(imageRect, QColor(0, 0, 0, 150));
    }
    painter->setClipping(false);
    if (image.isNull() || missing) {
        // A placeholder that says why: missing, damaged, or still being made.
        QString label = missing ? tr("Missing") : !problem.isEmpty() ? tr("Cannot be read") : QString();
        if (!label.isEmpty()) {
            painter->setPen(missing ? QColor(240, 180, 80) : QColor(230, 110, 100));
            QFont f = option.font;
            f.setBold(true);
            painter->setFont(f);
            painter->drawText(imageRect, Qt::AlignCenter, label);
        }
    }
    if (index.data(GalleryModel::KindRole).toString() == QStringLiteral("video") && !missing && !image.isNull()) {
        // A small play mark: this tile moves and has sound.
        const QPointF c(imageRect.right() - 16, imageRect.bottom() - 16);
        painter->setPen(Qt::NoPen);
        painter->setBrush(QColor(0, 0, 0, 140));
        painter->drawEllipse(c, 11, 11);
        painter->setBrush(Qt::white);
        const QPointF tri[] = {c + QPointF(-4, -6), c + QPointF(-4, 6), c + QPointF(7, 0)};
        painter->drawPolygon(tri, 3);
    }
    painter->setFont(option.font);
    painter->setPen(palette.color(QPalette::Text));
    const QRect text1(tile.left() + 2, imageRect.bottom() + 6, tile.width() - 4, option.fontMetrics.height());
    painter->drawText(text1, Qt::AlignLeft | Qt::AlignVCenter,
        option.fontMetrics.elidedText(index.data(Qt::DisplayRole).toString(), Qt::ElideRight, text1.width()));
    QFont small = option.font;
    small.setPointSizeF(std::max(7.0, small.pointSizeF() * 0.85));
    painter->setFont(small);
    QColor dim = palette.color(QPalette::Text);
    dim.setAlpha(150);
    painter->setPen(dim);
    const QRect text2(text1.left(), text1.bottom() + 2, text1.width(), QFontMetrics(small).height());
    QString meta = QLocale().toString(index.data(GalleryModel::CreatedRole).toDateTime(), QStringLiteral("d MMM yyyy, HH:mm"));
    if (const auto model = index.data(GalleryModel::ModelRole).toString(); !model.isEmpty())
        meta += QStringLiteral(" · ") + model;
    painter->drawText(text2, Qt::AlignLeft | Qt::AlignVCenter, QFontMetrics(small).elidedText(meta, Qt::ElideRight, text2.width()));
    painter->restore();
}

QSize GalleryDelegate::sizeHint(const QStyleOptionViewItem&, const QModelIndex&) const
{
    return {kTileWidth, kTileHeight};
}

}  // namespace vireo::ui
