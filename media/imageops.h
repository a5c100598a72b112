#pragma once

// Pictures prepared for conditioning a video on them (image-to-video, keyframes): fitted to
// the output's size, and put through the H.264 round trip LTX-2 saw its conditioning frames
// through in training.

#include "inference/util/result.h"
#include "media/mediareader.h"

namespace vireo::media {

// The x264 CRF LTX-2 and LTX-2.3 were trained with for conditioning stills (diffusers
// pipelines/ltx2/utils.py DEFAULT_IMAGE_CRF; LTX-2.5 uses 18).
inline constexpr int kLtxConditionCrf = 33;

// Scaled to cover width x height and cropped in the centre: the aspect ratio is kept, so a
// portrait photo for a landscape video loses its top and bottom rather than being squashed.
// (diffusers' LTX2ImageToVideoPipeline stretches the picture to the output's size, which users
// rightly dislike; its condition pipeline covers and crops as here, but resizes bilinearly
// without an antialiasing filter.) Area averaging when shrinking, bicubic when enlarging.
// An empty image or a size below 1 gives an empty image.
RgbImage fitToSize(const RgbImage& image, int width, int height);

// The picture as it is meant to be seen, given the EXIF orientation tag of its file (1 to 8:
// where the stored first row and first column belong): what PIL's ImageOps.exif_transpose,
// called by diffusers' load_image, makes of it. 5 to 8 swap width and height; 1 and any other
// value return the image as it is.
RgbImage exifUpright(const RgbImage& image, int orientation);

// One frame through libx264 (CRF `crf`, preset veryfast, yuv420p) and decoded back, as
// diffusers' apply_image_conditioning_crf (a port of ltx-pipelines' media_io.preprocess)
// does: the picture is first cut to even sides (its last row or column dropped), RGB and
// YUV are converted bilinearly with BT.601 limited range. crf 0 returns the image unchanged.
Result<RgbImage> recompressH264(const RgbImage& image, int crf);

}  // namespace vireo::media
