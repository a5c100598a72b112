#pragma once

// The gallery's rows for Qt's views: a flat list model over core's Gallery (newest first,
// thumbnails asked for only when a row is painted), a proxy that filters by prompt text and
// model and sorts by date, model or prompt, and the delegate that paints a tile. Built for
// 10,000 rows: no per-row widgets, uniform tile sizes, incremental inserts and removals.

#include <QAbstractListModel>
#include <QDateTime>
#include <QSortFilterProxyModel>
#include <QStyledItemDelegate>

namespace vireo::gallery {
class Gallery;
}

namespace vireo::ui {

class GalleryModel : public QAbstractListModel {
    Q_OBJECT
public:
    enum Role {
        IdRole = Qt::UserRole + 1,
        PathRole,
        CreatedRole,
        ModelRole,
        PromptRole,
        KindRole,
        MissingRole,
        ProblemRole,  // why there is no thumbnail ("truncated or damaged?"); empty when fine
        ThumbnailRole,  // QImage, null while being made
        HasRecipeRole,
    };

    explicit GalleryModel(gallery::Gallery* gallery, QObject* parent = nullptr);

    int rowCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QHash<int, QByteArray> roleNames() const override;
    QModelIndex indexOfId(qint64 id) const;
    gallery::Gallery* gallery() const { return m_gallery; }
    // The model titles present, for the filter.
    QStringList models() const;

private:
    void sync();

    gallery::Gallery* m_gallery;
    QList<qint64> m_ids;  // mirrors the gallery's rows, to turn a reload into inserts and removals
};

class GalleryFilter : public QSortFilterProxyModel {
    Q_OBJECT
public:
    enum class Order { Newest, Oldest, Model, Prompt };
    explicit GalleryFilter(QObject* parent = nullptr);

    void setText(const QString& text);
    void setModelTitle(const QString& title);  // empty: every model
    void setSince(const QDateTime& since);  // invalid: any date
    void setOrder(Order order);

protected:
    bool filterAcceptsRow(int row, const QModelIndex& parent) const override;
    bool lessThan(const QModelIndex& left, const QModelIndex& right) const override;

private:
    QString m_text, m_model;
    QDateTime m_since;
    Order m_order = Order::Newest;
};

class GalleryDelegate : public QStyledItemDelegate {
    Q_OBJECT
public:
    static constexpr int kTileWidth = 236, kTileHeight = 186, kImageHeight = 133;
    using QStyledItemDelegate::QStyledItemDelegate;
    void paint(QPainter* painter, const QStyleOptionViewItem& option, const QModelIndex& index) const override;
    QSize sizeHint(const QStyleOptionViewItem& option, const QModelIndex& index) const override;
};

}  // namespace vireo::ui
