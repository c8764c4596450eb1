/* op/tmap.h - a TMA tensor map that a kernel takes as a parameter, described so that whoever
 * launches the kernel can build it.
 *
 * The sm_90a templates read their operands with the tensor copy engine, which needs a 128-byte
 * descriptor (CUtensorMap) holding the tensor's address. The address is only known at launch,
 * so the kernel set carries the map's description instead: which buffer, element type, sizes,
 * byte strides, what one copy moves, swizzle and L2 promotion: exactly the arguments of the
 * driver's cuTensorMapEncodeTiled (a tiled map: a box of the tensor) or cuTensorMapEncodeIm2col
 * (an im2col map: a convolution's input, one copy gathering pixels_per_column window positions
 * of channels_per_pixel channels, zero outside the image). The launcher (worker, client
 * libraries, bench scripts) encodes it with the buffer's address (tuner_tmap_encode) and passes
 * the 128 bytes by value (`__grid_constant__`), where the copy engine reads it from the kernel's
 * parameter bank: about 0.6 us per launch sooner than a map the kernel builds in global memory
 * (bench/results/2026-11-24-h100-tmap-cost-dw-rows).
 *
 * One description, written by the tuner, stored by the cache, carried by the worker wire format
 * and answered to clients: its checks, its JSON form and its packed form live here, next to the
 * other vocabularies every module links. Nothing here calls the driver.
 */
#ifndef HIDET_OP_TMAP_H
#define HIDET_OP_TMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "op/op.h"

typedef struct cJSON cJSON;

#define TUNER_TMAP_MAX_RANK 5
#define TUNER_MAX_TMAPS 4      /* tensor-map parameters of one launch */
#define TUNER_TMAP_BYTES 128   /* sizeof(CUtensorMap); the parameter's alignment is 64 */
#define TUNER_TMAP_PACKED 120  /* bytes of one tuner_tmap_pack() record */

typedef enum { TUNER_TMAP_OOB_ZERO = 0, TUNER_TMAP_OOB_NAN = 1 } tuner_tmap_oob;
typedef enum { TUNER_TMAP_TILED = 0, TUNER_TMAP_IM2COL = 1 } tuner_tmap_mode;

typedef struct tuner_tmap {
    int buf;                    /* the buffer whose address the map holds, numbered as its
                                 * launch numbers pointer arguments (TUNER_BUF_*, kc_buf, ...) */
    tuner_tmap_mode mode;
    tuner_dtype dtype;          /* element type */
    int rank;                   /* 1..TUNER_TMAP_MAX_RANK (im2col: 3..5, channels first, images
                                 * last, the spatial dimensions between them, innermost first);
                                 * dimension 0 is the contiguous one */
    uint64_t dims[TUNER_TMAP_MAX_RANK];    /* elements per dimension: 1..2^32 */
    uint64_t strides[TUNER_TMAP_MAX_RANK - 1]; /* bytes between steps of dimensions 1..rank-1:
                                                * multiples of 16, below 2^40 */
    uint32_t box[TUNER_TMAP_MAX_RANK];     /* tiled: elements one copy moves per dimension,
                                            * 1..256; im2col: all 0 */
    uint32_t element_strides[TUNER_TMAP_MAX_RANK]; /* 1..8 (im2col: the convolution's strides
                                                    * in the spatial dimensions) */
    /* Im2col only (all 0 in a tiled map). A copy at coordinates (c, x..., n) with offsets o...
     * (the instruction's im2col offsets: a window position) reads pixels_per_column pixels
     * starting at base pixel (x..., n), stepping by element_strides through the bounding box
     * [lower_corner, dims - 1 + upper_corner] of each spatial dimension, innermost first, then
     * to the next image; each pixel read at base + o, channels c..c + channels_per_pixel - 1,
     * zero (or NaN) outside the tensor. Corners are per spatial dimension, in [-2^15, 2^15 - 1]
     * (rank 3), [-128, 127] (rank 4) or [-16, 15] (rank 5). */
    int32_t lower_corner[TUNER_TMAP_MAX_RANK - 2];
    int32_t upper_corner[TUNER_TMAP_MAX_RANK - 2];
    uint32_t channels_per_pixel; /* 1..256, a whole number of 16-byte units */
    uint32_t pixels_per_column;  /* 1..1024 */
    /* A dynamic op's map (tiled only): sym[i] != 0 marks dimension i as following the op's named
     * dims (a bit set over tuner_op.dims, as tuner_tensor.sym): at launch it is sym_coef[i] times
     * the product of their sizes, and dims[i] holds that value at the dims' max. Strides never
     * depend on a size (names stand on a tensor's axis 0 only). All zero in a static map; not
     * part of tuner_tmap_pack's record (the cache keeps them beside the launch). */
    uint8_t sym[TUNER_TMAP_MAX_RANK];
    uint64_t sym_coef[TUNER_TMAP_MAX_RANK];
    int swizzle;                /* shared-memory swizzle span in bytes: 0 (none), 32, 64, 128 */
    int l2_promotion;           /* bytes: 0 (none), 64, 128, 256 */
    tuner_tmap_oob oob_fill;    /* what out-of-bounds box elements read as */
} tuner_tmap;

/* 0 when m is a map its encoder (cuTensorMapEncodeTiled or cuTensorMapEncodeIm2col) accepts for
 * any 16-byte aligned address (ranges above; a copy's row, box[0] or channels_per_pixel, a whole
 * number of 16-byte units no wider than the swizzle span; an im2col bounding box holding at
 * least one pixel); else -EINVAL with the reason and the offending field ("dims[1]", "swizzle",
 * ...) in why/field, each may be NULL. m->buf is not checked (its numbering is the caller's). */
int tuner_tmap_check(const tuner_tmap *m, char *why, size_t why_len, char *field, size_t field_len);

/* The map as JSON, without its buffer (the caller names that in its own vocabulary). Tiled:
 * {"dtype":"f16","dims":[..],"strides":[..],"box":[..],"element_strides":[..],"swizzle":128,
 *  "l2_promotion":0,"oob_fill":"zero"}; im2col: "mode":"im2col" first, no "box", and
 * "lower_corner", "upper_corner" (one entry per spatial dimension), "channels_per_pixel",
 * "pixels_per_column" after "element_strides". NULL when out of memory. */
cJSON *tuner_tmap_to_json(const tuner_tmap *m);

/* The named dims a symbolic map dimension is written with: by name (an answer to clients, which
 * know the kernel set's dims by name) or by index into tuner_op.dims (the cache's export format:
 * it keeps the dims beside the maps, in that order). */
typedef struct tuner_tmap_dims {
    int n;                 /* the op's named dims: a symbolic dimension references 0..n-1 */
    const int64_t *max;    /* n entries, each dim's max: from_json makes dims[i] (the value at
                            * the dims' max) from them; unused by to_json */
    const char *(*name)(const void *ctx, int k); /* dim k's name; NULL: indices */
    const void *ctx;
} tuner_tmap_dims;

/* tuner_tmap_to_json, a symbolic dimension i (sym[i] != 0) written in "dims" as an object
 * {"dims":[sym[i]'s dims, lowest bit first],"coef":sym_coef[i]}: names when dims and dims->name
 * are given, else indices. tuner_tmap_to_json(m) is this with dims NULL; a static map's JSON is
 * the same either way. */
cJSON *tuner_tmap_to_json_dims(const tuner_tmap *m, const tuner_tmap_dims *dims);
/* Adds to obj a "maps" array of the n maps' JSON (tuner_tmap_to_json), each with its buffer as
 * member buf_member, whose value buf_item makes from tuner_tmap.buf in the caller's vocabulary
 * (a number, a name); nothing when n is 0. False when out of memory (obj holds what was added). */
bool tuner_tmaps_add_json(cJSON *obj, const tuner_tmap *maps, int n, const char *buf_member,
                          cJSON *(*buf_item)(int buf));

/* Parses what tuner_tmap_to_json writes, strictly (no unknown member, every member of the
 * mode present, tuner_tmap_check passing; "mode" absent or "tiled" is a tiled map). own_member (may be NULL) names one more member the caller reads
 * itself, beside the map's: where a format keeps the map's buffer in the same object. Returns 0,
 * or -EINVAL with the message and the offending member's name in why/field; *ret's buf is left
 * as it was. */
int tuner_tmap_from_json(const cJSON *j, const char *own_member, tuner_tmap *ret, char *why, size_t why_len,
                         char *field, size_t field_len);
/* tuner_tmap_from_json that also reads symbolic dimensions as tuner_tmap_to_json_dims writes
 * them (tiled maps only): entries are names among dims' n (with dims->name) or indices below
 * dims->n (without), each once, coef a whole number >= 1; dims[i] becomes coef times the product
 * of their max. tuner_tmap_from_json is this with dims NULL, which refuses a symbolic dimension
 * ("a tensor map's dimension follows named dims its format does not carry"). */
int tuner_tmap_from_json_dims(const cJSON *j, const char *own_member, const tuner_tmap_dims *dims, tuner_tmap *ret,
                              char *why, size_t why_len, char *field, size_t field_len);

/* Whether m has a symbolic dimension (a dynamic op's map). */
bool tuner_tmap_is_symbolic(const tuner_tmap *m);
/* The static map m stands for at the named dims' sizes (sizes[k]: dim k's, TUNER_MAX_DIMS or
 * more entries; entries m does not reference are not read): each symbolic dimension becomes
 * sym_coef * the product of its dims' sizes, sym and sym_coef cleared, and the result checked
 * (tuner_tmap_check). 0, or -EINVAL when a size is below 1 or a dimension leaves 1..2^32; *out
 * untouched then. A static map binds to itself. */
int tuner_tmap_bind(const tuner_tmap *m, const int64_t *sizes, tuner_tmap *out);

/* Fixed little-endian record of TUNER_TMAP_PACKED bytes (the cache stores a launch's maps as
 * their concatenation); buf is written as one byte. An im2col map keeps its own fields where a
 * tiled one keeps its box, so the record of a tiled map is what it was before im2col maps. */
void tuner_tmap_pack(const tuner_tmap *m, uint8_t out[TUNER_TMAP_PACKED]);
/* Reads a record back; -EINVAL when it does not pass tuner_tmap_check or buf is not in
 * 0..max_buf. */
int tuner_tmap_unpack(const uint8_t in[TUNER_TMAP_PACKED], int max_buf, tuner_tmap *ret);

/* Same record (tuner_tmap_pack) and the same symbolic dimensions. */
bool tuner_tmap_equal(const tuner_tmap *a, const tuner_tmap *b);

/* Bytes from the buffer's start to the end of the last element the map can address: a launcher
 * checks that its buffer holds that many before it hands the map to the copy engine. Saturates
 * at UINT64_MAX. */
uint64_t tuner_tmap_extent(const tuner_tmap *m);

/* The values of the encoders' enum arguments (CUtensorMapDataType, ...Swizzle, ...L2promotion,
 * ...FloatOOBfill; interleave is always CU_TENSOR_MAP_INTERLEAVE_NONE, 0). */
int tuner_tmap_cu_dtype(const tuner_tmap *m);
int tuner_tmap_cu_swizzle(const tuner_tmap *m);
int tuner_tmap_cu_l2_promotion(const tuner_tmap *m);
int tuner_tmap_cu_oob_fill(const tuner_tmap *m);

/* The driver's encoders as a launcher reaches them: linked (a wrapper casting the enums) or
 * looked up with dlsym (the enums are ints, cuuint32_t/cuuint64_t these widths). They return the
 * driver's CUresult. */
typedef int (*tuner_tmap_tiled_fn)(void *map, int dtype, uint32_t rank, void *addr, const uint64_t *dims,
                                   const uint64_t *strides, const uint32_t *box, const uint32_t *element_strides,
                                   int interleave, int swizzle, int l2_promotion, int oob_fill);
typedef int (*tuner_tmap_im2col_fn)(void *map, int dtype, uint32_t rank, void *addr, const uint64_t *dims,
                                    const uint64_t *strides, const int *lower_corner, const int *upper_corner,
                                    uint32_t channels_per_pixel, uint32_t pixels_per_column,
                                    const uint32_t *element_strides, int interleave, int swizzle,
                                    int l2_promotion, int oob_fill);
typedef struct tuner_tmap_encoders {
    tuner_tmap_tiled_fn tiled;   /* cuTensorMapEncodeTiled; NULL: the driver has none */
    tuner_tmap_im2col_fn im2col; /* cuTensorMapEncodeIm2col; likewise */
} tuner_tmap_encoders;

/* The driver function that encodes m: "cuTensorMapEncodeTiled" or "cuTensorMapEncodeIm2col". */
const char *tuner_tmap_encoder_name(const tuner_tmap *m);
/* Whether enc has that function (a launcher checks before it loads a module). */
bool tuner_tmap_can_encode(const tuner_tmap *m, const tuner_tmap_encoders *enc);
/* Encodes m for the buffer at addr into out (TUNER_TMAP_BYTES, 64-byte aligned) with the
 * encoder of its mode: the driver's CUresult (0 is success), or -ENOSYS when enc lacks it. */
int tuner_tmap_encode(const tuner_tmap *m, uint64_t addr, void *out, const tuner_tmap_encoders *enc);

#endif
