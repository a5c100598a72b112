#pragma once

#include "core/output/recipe.h"

#include <optional>
#include <QElapsedTimer>
#include <QWidget>

class QAudioOutput;
class QComboBox;
class QLabel;
class QLineEdit;
class QListView;
class QMediaPlayer;
class QPushButton;
class QSlider;
class QStackedWidget;
class QTextBrowser;
class QTimer;

namespace vireo::gallery {
class Gallery;
}

namespace vireo::ui {

class GalleryDelegate;
class GalleryFilter;
class GalleryModel;
class VideoView;

// Every output kept: a grid of thumbnails (filter by prompt and model, sort by date, model or
// prompt), and a detail view that plays the clip with its sound, steps through frames, shows
// the recipe, and makes it again.
class GalleryPage : public QWidget {
    Q_OBJECT
public:
    explicit GalleryPage(gallery::Gallery* gallery, QWidget* parent = nullptr);

    // Opens the detail view of a row; false when it is not in the gallery.
    bool openItem(qint64 id);
    void showGrid();
    qint64 currentItem() const { return m_current; }
    QListView* grid() const { return m_grid; }
    GalleryModel* model() const { return m_model; }
    GalleryFilter* filter() const { return m_filter; }
    QMediaPlayer* player() const { return m_player; }

    // The actions of the detail view, also for tests and shortcuts.
    bool deleteCurrent();
    bool undoDelete();
    bool exportCurrent(const QString& destination, QString* error = nullptr);
    bool locateCurrent(const QString& newPath, QString* error = nullptr);
    bool forgetCurrent();
    void stepFrames(int frames);
    // Sends an output to the Generate page's start image: an image as it is, a video's first
    // frame saved as a PNG; false (with the reason) when it cannot be read.
    bool useAsStartImage(qint64 id, QString* error = nullptr);
    // "Extend this clip" on a video: false with the reason when the file is gone or damaged.
    bool extendClip(qint64 id, QString* error = nullptr);
    // Retake [start, end) s of a clip (the "Retake a span…" button asks for them, around the
    // playing position): the Generate page gets its recipe, a new seed and the retake.
    bool retakeClip(qint64 id, double start, double end, bool video = true, bool audio = true, QString* error = nullptr);

signals:
    // "Generate again" (the same seed) and "Vary" (a new one): the window fills the Generate page.
    void generateRequested(const output::Recipe& recipe, bool vary);
    // "Animate this image" / "Use first frame as start image": a picture to start a video from.
    void startImageRequested(const QString& path);
    // "Extend this clip": the video's recipe (hasRecipe false: none) and the video, whose last
    // frames the next video starts from.
    void extendClipRequested(const QString& path, const output::Recipe& recipe, bool hasRecipe);
    // Retake: [start, end) s of this clip made again from its recipe (a new seed), the rest kept.
    void retakeRequested(
        const QString& path, const output::Recipe& recipe, bool hasRecipe, double start, double end, bool video, bool audio);
    void message(const QString& text);

protected:
    void showEvent(QShowEvent* event) override;

private:
    // A clip to start from (extend, retake; `verb` says which in the refusal): its recipe without
    // what it was conditioned on, or nothing and why.
    std::optional<output::Recipe> startFromClip(qint64 id, const QString& verb, QString* error, bool* hasRecipe) const;
    // The constructor's parts.
    QWidget* gridView();
    QWidget* detailView();
    void connectActions();
    void connectGallery();
    void refreshModels();
    void updateCount();
    void showProblem(const QString& text);
    void showDetail();
    void ensurePlayer();
    void updatePosition(qint64 ms);
    void reveal();

    gallery::Gallery* m_gallery;
    GalleryModel* m_model;
    GalleryFilter* m_filter;
    QStackedWidget* m_stack;
    QStackedWidget* m_gridStack;
    QListView* m_grid;
    QLineEdit* m_search;
    QComboBox* m_modelFilter;
    QComboBox* m_sort;
    QLabel* m_count;
    QLabel* m_problem;
    QWidget* m_undoBar;
    QLabel* m_undoLabel;
    QTimer* m_undoTimer;
    QString m_undoToken;

    // Detail view.
    qint64 m_current = 0;
    std::optional<output::Recipe> m_recipe;
    QLabel* m_title;
    QStackedWidget* m_media;
    VideoView* m_video;
    QLabel* m_image;
    QLabel* m_placeholder;
    QWidget* m_transport;
    QPushButton* m_play;
    QSlider* m_position;
    QLabel* m_time;
    QTextBrowser* m_recipeView;
    QLabel* m_detailProblem;
    QPushButton* m_again;
    QPushButton* m_vary;
    QPushButton* m_copyPrompt;
    QPushButton* m_reveal;
    QPushButton* m_export;
    QPushButton* m_delete;
    QPushButton* m_locate;
    QPushButton* m_forget;
    QPushButton* m_startImage;
    QPushButton* m_extend;
    QPushButton* m_retakeSpan = nullptr;
    QMediaPlayer* m_player = nullptr;
    bool m_noAudioDevice = false;
    double m_fps = 24;
    quint64 m_stepTicket = 0;  // the latest frame step; an older decode arriving late is dropped
    QElapsedTimer m_lastRescan;
};

}  // namespace vireo::ui
