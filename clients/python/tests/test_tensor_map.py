"""Tensor-map parameters (docs/api.md): a kernel set's "tensor_map" params, tiled and im2col,
parsed as strictly as the daemon writes them (op/tmap.c), damaged ones refused naming the member,
buffers smaller than a map's extent refused, and what the launcher hands the driver: each map
encoded by its mode's encoder for its buffer's address at the first launch and again only when
that address changes, kernelParams pointing to its 128 bytes at a 64-byte aligned address, and a
driver without the encoder a kernel's maps need refused by name. Needs no daemon and no GPU:
kernel sets and plans are written here, and a recording stand-in replaces the driver (RealDriver
alone encodes through libcuda, where a GPU is)."""
import copy
import ctypes
import json
import re
import unittest

from support import FakeDriver, FakeTensor, hidetd
from hidetd import _cuda
from hidetd.kernel import parse_kernel_set, tensor_map_extent

KEY = "5a" * 32
# A [128, 256] f16 row-major operand as its TMA map: dimension 0 the contiguous one.
A_MAP = {"dtype": "f16", "dims": [256, 128], "strides": [512], "box": [64, 64],
         "element_strides": [1, 1], "swizzle": 128, "l2_promotion": 256, "oob_fill": "zero"}
REQUEST = {"op": "matmul", "inputs": [{"shape": [128, 256], "dtype": "f16"},
                                      {"shape": [256, 64], "dtype": "f16"}]}
FIELD = r"kernel_set\.kernels\[0\]\.params\[3\]"
MAP_MARK = 0x7e4d << 48
# A convolution's input as conv2d_wgmma describes it (op/tests/test_tmap.c): NHWC f16, 32 images
# of 56x56x64, a 3x3 window with padding 1 (corners -1, 1 - 2), 128 pixels of 64 channels per
# copy; it spans the [32, 56, 56, 64] input exactly.
I2C_MAP = {"mode": "im2col", "dtype": "f16", "dims": [64, 56, 56, 32],
           "strides": [128, 7168, 401408], "element_strides": [1, 1, 1, 1],
           "lower_corner": [-1, -1], "upper_corner": [-1, -1], "channels_per_pixel": 64,
           "pixels_per_column": 128, "swizzle": 128, "l2_promotion": 0, "oob_fill": "zero"}
# The weights beside it, [64, 576] f16 (K = 3 * 3 * 64), as a tiled map.
W_MAP = {"dtype": "f16", "dims": [576, 64], "strides": [1152], "box": [64, 64],
         "element_strides": [1, 1], "swizzle": 128, "l2_promotion": 256, "oob_fill": "zero"}
CONV_REQUEST = {"op": "conv2d", "inputs": [{"shape": [32, 56, 56, 64], "dtype": "f16"},
                                           {"shape": [64, 576], "dtype": "f16"}]}
# What the fake im2col encoder writes, so that a launch shows which encoder made its map.
I2C_MARK = 0x12c0 << 48


def kernel_set(tmap=None, param=None):
    """A kernel set of one kernel: three pointers, then a tensor map of input0 (`tmap`, or
    `param` as the whole fourth parameter)."""
    params = [{"index": 0, "buffer": "input0", "type": "pointer"},
              {"index": 1, "buffer": "input1", "type": "pointer"},
              {"index": 2, "buffer": "output", "type": "pointer"},
              param or {"index": 3, "buffer": "input0", "type": "tensor_map",
                        "tensor_map": copy.deepcopy(A_MAP if tmap is None else tmap)}]
    return {"key": KEY, "workspace_bytes": 0, "output": {"shape": [128, 64], "dtype": "f16"},
            "kernels": [{"name": "k_tma", "grid": [2, 1, 1], "block": [128, 1, 1],
                         "shared_bytes": 0, "params": params}]}


def pretransposed_set(ws_bytes=256 * 64 * 2):
    """A kernel set shaped as matmul_wgmma's with B transposed before the GEMM (pretranspose):
    a first kernel reads input1 and writes the workspace (B^T, [64, 256] f16 here), the second
    reads B^T through a tensor map of the workspace."""
    bt = {"name": "k_bt", "grid": [1, 2, 1], "block": [256, 1, 1], "shared_bytes": 0,
          "params": [{"index": 0, "buffer": "input1", "type": "pointer"},
                     {"index": 1, "buffer": "workspace", "type": "pointer"}]}
    ks = kernel_set()
    ks["workspace_bytes"] = ws_bytes
    ks["kernels"][0]["params"].append({"index": 4, "buffer": "workspace", "type": "tensor_map",
                                       "tensor_map": dict(A_MAP, dims=[256, 64])})
    ks["kernels"].insert(0, bt)
    return ks


def with_map(**changes):
    m = dict(A_MAP, **changes)
    return kernel_set({k: v for k, v in m.items() if v is not None})


def with_i2c(**changes):
    """kernel_set() with I2C_MAP changed as given (a member given None is left out)."""
    m = dict(I2C_MAP, **changes)
    return kernel_set({k: v for k, v in m.items() if v is not None})


def conv_set(i2c=None, request=CONV_REQUEST):
    """A convolution's kernel set of one kernel: three pointers, then an im2col map of input0
    (`i2c`, else I2C_MAP) and a tiled map of input1 (W_MAP)."""
    ks = kernel_set(copy.deepcopy(I2C_MAP if i2c is None else i2c))
    k = ks["kernels"][0]
    k["name"] = "k_conv"
    k["params"].append({"index": 4, "buffer": "input1", "type": "tensor_map",
                        "tensor_map": copy.deepcopy(W_MAP)})
    ks["output"] = {"shape": [32, 56, 56, 64], "dtype": "f16"}
    return ks


def parsed_map(ks, param=3):
    return parse_kernel_set(ks, 2, "kernel_set")[2][0][4][param][2]


class Parse(unittest.TestCase):
    def refused(self, ks, pattern):
        with self.assertRaisesRegex(hidetd.PlanError, pattern):
            parse_kernel_set(ks, 2, "kernel_set")

    def test_accepted(self):
        key, ws, kernels = parse_kernel_set(kernel_set(), 2, "kernel_set")
        self.assertEqual((key, ws), (KEY, 0))
        name, grid, block, shared, params = kernels[0]
        self.assertEqual(name, "k_tma")
        self.assertEqual([p[:2] for p in params],
                         [(0, "input0"), (1, "input1"), (2, "output"), (3, "input0")])
        self.assertEqual([p[2] for p in params[:3]], [None, None, None])
        tmap = params[3][2]
        self.assertEqual(tmap, A_MAP)
        self.assertEqual((tmap["dims"], tmap["strides"], tmap["box"], tmap["swizzle"],
                          tmap["l2_promotion"], tmap["oob_fill"]),
                         ([256, 128], [512], [64, 64], 128, 256, "zero"))

    def test_whole_numbers_as_the_c_parsers_read_them(self):
        # JSON numbers are doubles to the daemon and libhidet-client: 128.0 is 128 there, and a
        # boolean is no number. The parsed kernel set holds ints either way.
        ks = kernel_set(dict(A_MAP, dims=[256.0, 128], strides=[512.0], box=[64, 64.0],
                             swizzle=128.0, l2_promotion=256.0))
        ks["workspace_bytes"] = 0.0
        k = ks["kernels"][0]
        k["grid"], k["block"], k["shared_bytes"] = [2.0, 1, 1], [128.0, 1.0, 1], 0.0
        k["params"][3]["index"] = 3.0
        _, ws, kernels = parse_kernel_set(ks, 2, "kernel_set")
        _, grid, block, shared, params = kernels[0]
        parsed = (ws, grid, block, shared, params[3][0], params[3][2])
        self.assertEqual(parsed, (0, [2, 1, 1], [128, 1, 1], 0, 3, A_MAP))
        tmap = params[3][2]
        for v in ([ws, shared, params[3][0], tmap["swizzle"], tmap["l2_promotion"]] + grid + block +
                  tmap["dims"] + tmap["strides"] + tmap["box"]):
            self.assertIs(type(v), int)
        self.assertIs(type(parsed_map(conv_set(dict(I2C_MAP, channels_per_pixel=64.0,
                                                     pixels_per_column=128.0,
                                                     lower_corner=[-1.0, -1])))
                           ["channels_per_pixel"]), int)

        def kernel(**changes):
            ks = kernel_set()
            ks["kernels"][0].update(changes)
            return ks
        self.refused(kernel(grid=[True, 1, 1]), r"kernels\[0\]\.grid: expected three positive")
        self.refused(kernel(block=[128.5, 1, 1]), r"kernels\[0\]\.block: expected three positive")
        self.refused(kernel(shared_bytes=False), r"kernels\[0\]\.shared_bytes: expected a non-negative")
        self.refused(dict(kernel_set(), workspace_bytes=1.5), r"kernel_set\.workspace_bytes")
        self.refused(with_map(swizzle=True), FIELD + r"\.tensor_map\.swizzle: swizzle must be")
        self.refused(with_map(dims=[256, 128.25]), FIELD + r"\.tensor_map\.dims\[1\]: dims entries must be "
                                                          r"whole")

    def test_rank_one_and_five(self):
        one = {"dtype": "f32", "dims": [1024], "strides": [], "box": [32], "element_strides": [1],
               "swizzle": 0, "l2_promotion": 0, "oob_fill": "nan"}
        self.assertEqual(parse_kernel_set(kernel_set(one), 2, "kernel_set")[2][0][4][3][2], one)
        five = dict(A_MAP, dims=[64, 2, 2, 2, 2], strides=[128, 256, 512, 1024],
                    box=[64, 1, 1, 1, 1], element_strides=[1, 1, 1, 1, 2])
        self.assertEqual(parse_kernel_set(kernel_set(five), 2, "kernel_set")[2][0][4][3][2], five)

    def test_unknown_member(self):
        self.refused(with_map(interleave=0), FIELD + r"\.tensor_map\.interleave: unknown member")

    def test_missing_members(self):
        self.refused(with_map(box=None), FIELD + r"\.tensor_map\.box: box must be an array, got None")
        self.refused(with_map(oob_fill=None), FIELD + r"\.tensor_map\.oob_fill: oob_fill must be")
        self.refused(with_map(dtype=None), FIELD + r"\.tensor_map\.dtype: dtype must be")
        param = {"index": 3, "buffer": "input0", "type": "tensor_map"}
        self.refused(kernel_set(param=param), FIELD + r"\.tensor_map: a tensor map must be an object")

    def test_bad_swizzle(self):
        self.refused(with_map(swizzle=48), FIELD + r"\.tensor_map\.swizzle: swizzle must be 0, 32, "
                                                   r"64 or 128 bytes, got 48")
        # false == 0 in Python: a JSON boolean is still no number of bytes.
        self.refused(with_map(swizzle=False), FIELD + r"\.tensor_map\.swizzle: .*got False")
        self.refused(with_map(l2_promotion=32), FIELD + r"\.tensor_map\.l2_promotion: ")

    def test_box_wider_than_swizzle(self):
        self.refused(with_map(swizzle=64), FIELD + r"\.tensor_map\.box\[0\]: the box's inner "
                                                   r"dimension \(128 bytes\) exceeds the swizzle "
                                                   r"span \(64 bytes\)")
        # Without a swizzle the same box is fine, and one of 8 bytes is not.
        parse_kernel_set(with_map(swizzle=0), 2, "kernel_set")
        self.refused(with_map(swizzle=0, box=[4, 64]), FIELD + r"\.tensor_map\.box\[0\]: .*multiple "
                                                               r"of 16 bytes, got 8 bytes")

    def test_strides_count(self):
        self.refused(with_map(strides=[512, 512]), FIELD + r"\.tensor_map\.strides: the number of "
                                                           r"strides entries must be 1, got 2")
        self.refused(with_map(strides=[]), FIELD + r"\.tensor_map\.strides: .* must be 1, got 0")
        self.refused(with_map(box=[64]), FIELD + r"\.tensor_map\.box: .* must be 2, got 1")

    def test_ranges(self):
        self.refused(with_map(strides=[520]), FIELD + r"\.tensor_map\.strides\[0\]: a stride must "
                                                      r"be a positive multiple of 16 bytes")
        self.refused(with_map(strides=[1 << 40]), FIELD + r"\.tensor_map\.strides\[0\]: strides "
                                                          r"entries must be whole numbers")
        self.refused(with_map(dims=[256, 0]), FIELD + r"\.tensor_map\.dims\[1\]: ")
        self.refused(with_map(dims=[256, 128.5]), FIELD + r"\.tensor_map\.dims\[1\]: ")
        self.refused(with_map(box=[64, 257]), FIELD + r"\.tensor_map\.box\[1\]: ")
        self.refused(with_map(element_strides=[1, 9]), FIELD + r"\.tensor_map\.element_strides\[1\]: ")
        self.refused(with_map(dims=[8] * 6, strides=[16] * 5, box=[8] * 6, element_strides=[1] * 6),
                     FIELD + r"\.tensor_map\.dims: the number of dims entries must be 1\.\.5, got 6")
        self.refused(with_map(dtype="f64"), FIELD + r"\.tensor_map\.dtype: ")
        self.refused(with_map(oob_fill="one"), FIELD + r"\.tensor_map\.oob_fill: ")

    def test_unknown_param_type(self):
        param = {"index": 3, "buffer": "input0", "type": "texture"}
        self.refused(kernel_set(param=param), FIELD + r"\.type: 'texture' is not a parameter kind "
                                                      r"this client can pass \(pointer, tensor_map\)")

    def test_map_buffer_checked_like_a_pointer(self):
        param = {"index": 3, "buffer": "input2", "type": "tensor_map", "tensor_map": A_MAP}
        self.refused(kernel_set(param=param), FIELD + r"\.buffer: 'input2', but the request has 2 inputs")

    def test_kernel_buffer_smaller_than_map(self):
        hidetd.Kernel(None, kernel_set(), REQUEST)  # the map spans input0 exactly
        with self.assertRaisesRegex(hidetd.PlanError, r"kernel_set: input0 has 65536 bytes, too few "
                                                      r"for the tensor map of input0 \(66048 bytes\)"):
            hidetd.Kernel(None, with_map(dims=[256, 129]), REQUEST)

    def test_workspace_smaller_than_map(self):
        hidetd.Kernel(None, pretransposed_set(), REQUEST)  # B^T spans the workspace exactly
        with self.assertRaisesRegex(hidetd.PlanError, r"kernel_set: workspace has 32767 bytes, too few "
                                                      r"for the tensor map of workspace \(32768 bytes\)"):
            hidetd.Kernel(None, pretransposed_set(32767), REQUEST)

    def test_explicit_tiled_mode(self):
        # "mode": "tiled" may be spelt out; the map reads as the daemon writes it, without.
        self.assertEqual(parsed_map(with_map(mode="tiled")), A_MAP)
        self.refused(with_map(mode="tiled", box=None), FIELD + r"\.tensor_map\.box: box must be an "
                                                              r"array, got None")


I2C = FIELD + r"\.tensor_map"


class ParseIm2col(unittest.TestCase):
    """The im2col maps of op/tmap.c's tuner_tmap_from_json and tuner_tmap_check, accepted and
    refused as the daemon does."""

    def refused(self, ks, pattern):
        with self.assertRaisesRegex(hidetd.PlanError, pattern):
            parse_kernel_set(ks, 2, "kernel_set")

    def test_accepted(self):
        tmap = parsed_map(kernel_set(I2C_MAP))
        self.assertEqual(tmap, I2C_MAP)
        self.assertEqual((tmap["mode"], tmap["lower_corner"], tmap["upper_corner"],
                          tmap["channels_per_pixel"], tmap["pixels_per_column"]),
                         ("im2col", [-1, -1], [-1, -1], 64, 128))
        self.assertNotIn("box", tmap)
        # Round trip: what the parser returns is a map it accepts, as JSON too.
        self.assertEqual(parsed_map(kernel_set(json.loads(json.dumps(tmap)))), I2C_MAP)
        # A tiled map and an im2col map side by side, each of its own mode.
        params = parse_kernel_set(conv_set(), 2, "kernel_set")[2][0][4]
        self.assertEqual((params[3][2], params[4][2]), (I2C_MAP, W_MAP))

    def test_rank_three_and_five(self):
        # Rank 3: one spatial dimension, corners of 16 bits.
        three = dict(I2C_MAP, dims=[64, 100, 8], strides=[128, 12800], element_strides=[1, 2, 1],
                     lower_corner=[-32768], upper_corner=[32767], oob_fill="nan")
        self.assertEqual(parsed_map(with_i2c(**three)), three)
        # Rank 5: three of 5 bits.
        five = dict(I2C_MAP, dims=[64, 8, 8, 8, 2], strides=[128, 1024, 8192, 65536],
                    element_strides=[1, 1, 1, 1, 1], lower_corner=[-16, -3, 15],
                    upper_corner=[15, -7, 8])
        self.assertEqual(parsed_map(with_i2c(**five)), five)

    def test_rank(self):
        self.refused(with_i2c(dims=[64, 56], strides=[128], element_strides=[1, 1], lower_corner=[],
                              upper_corner=[]),
                     I2C + r"\.dims: the number of dims entries must be 3\.\.5, got 2")
        self.refused(with_i2c(dims=[8] * 6, strides=[16] * 5, element_strides=[1] * 6,
                              lower_corner=[0] * 4, upper_corner=[0] * 4),
                     I2C + r"\.dims: the number of dims entries must be 3\.\.5, got 6")

    def test_members_of_the_other_mode(self):
        self.refused(with_i2c(box=[64, 1, 1, 1]), I2C + r"\.box: unknown member of an im2col tensor map")
        self.refused(with_map(lower_corner=[-1]), I2C + r"\.lower_corner: unknown member of a tiled "
                                                         r"tensor map")
        self.refused(with_map(mode="tiled", channels_per_pixel=64),
                     I2C + r"\.channels_per_pixel: unknown member of a tiled tensor map")
        self.refused(with_i2c(interleave=0), I2C + r"\.interleave: unknown member of an im2col")

    def test_bad_mode(self):
        for mode in ("im2cols", "Tiled", "", 1, True, [], None):
            m = dict(I2C_MAP, mode=mode)
            self.refused(kernel_set(m), I2C + r'\.mode: mode must be "tiled" or "im2col", got %s' %
                         re.escape(repr(mode)))

    def test_missing_members(self):
        for member in ("lower_corner", "upper_corner", "channels_per_pixel", "pixels_per_column",
                       "element_strides", "strides", "dtype"):
            self.refused(with_i2c(**{member: None}), I2C + r"\.%s: " % member)

    def test_corner_count(self):
        self.refused(with_i2c(lower_corner=[-1]), I2C + r"\.lower_corner: the number of lower_corner "
                                                        r"entries must be 2, got 1")
        self.refused(with_i2c(upper_corner=[-1, -1, 0]), I2C + r"\.upper_corner: the number of "
                                                               r"upper_corner entries must be 2, got 3")
        self.refused(with_i2c(lower_corner=-1), I2C + r"\.lower_corner: lower_corner must be an array")

    def test_corner_not_whole(self):
        self.refused(with_i2c(lower_corner=[-1, -1.5]), I2C + r"\.lower_corner\[1\]: lower_corner "
                                                              r"entries must be whole numbers")
        self.refused(with_i2c(upper_corner=[True, -1]), I2C + r"\.upper_corner\[0\]: ")
        self.refused(with_i2c(dims=[64, 100, 8], strides=[128, 12800], element_strides=[1, 1, 1],
                              lower_corner=[-32769], upper_corner=[0]),
                     I2C + r"\.lower_corner\[0\]: lower_corner entries must be whole numbers in "
                           r"-32768\.\.32767, got -32769")

    def test_corner_range_by_rank(self):
        # Rank 4: 8 bits per corner.
        self.refused(with_i2c(lower_corner=[-1, -129]), I2C + r"\.lower_corner\[1\]: a corner of a "
                                                              r"rank-4 im2col map must be in "
                                                              r"-128\.\.127, got -129")
        self.refused(with_i2c(upper_corner=[128, -1]), I2C + r"\.upper_corner\[0\]: .*rank-4 .* "
                                                             r"-128\.\.127, got 128")
        parsed_map(with_i2c(lower_corner=[-128, 0], upper_corner=[127, 0]))
        # Rank 5: 5 bits.
        five = dict(dims=[64, 8, 8, 8, 2], strides=[128, 1024, 8192, 65536],
                    element_strides=[1] * 5, lower_corner=[0, 0, 0], upper_corner=[0, 0, 0])
        self.refused(with_i2c(**dict(five, lower_corner=[0, 0, -17])),
                     I2C + r"\.lower_corner\[2\]: a corner of a rank-5 im2col map must be in "
                           r"-16\.\.15, got -17")
        self.refused(with_i2c(**dict(five, upper_corner=[16, 0, 0])), I2C + r"\.upper_corner\[0\]: ")
        # Rank 3: 16 bits, so 200 (out of range at rank 4) is fine.
        three = dict(dims=[64, 100, 8], strides=[128, 12800], element_strides=[1, 1, 1])
        parsed_map(with_i2c(**dict(three, lower_corner=[-200], upper_corner=[200])))
        self.refused(with_i2c(lower_corner=[-1, -1], upper_corner=[-1, 200]),
                     I2C + r"\.upper_corner\[1\]: .*rank-4")

    def test_empty_bounding_box(self):
        # Spatial dimension 1 (dims[2] = 56): 56 - 1 - 60 < -4 holds no window position; -59
        # leaves one.
        self.refused(with_i2c(lower_corner=[-1, -4], upper_corner=[-1, -60]),
                     I2C + r"\.upper_corner\[1\]: the bounding box of spatial dimension 1 holds no "
                           r"pixel \(dims\[2\] - 1 \+ upper_corner\[1\] = -5 is below "
                           r"lower_corner\[1\] = -4\)")
        parsed_map(with_i2c(lower_corner=[-1, -4], upper_corner=[-1, -59]))
        # A lower corner past the far end of a small dimension.
        self.refused(with_i2c(dims=[64, 4, 56, 32], strides=[128, 512, 28672], lower_corner=[4, 0],
                              upper_corner=[0, 0]), I2C + r"\.upper_corner\[0\]: the bounding box")

    def test_channels_per_pixel(self):
        self.refused(with_i2c(channels_per_pixel=60), I2C + r"\.channels_per_pixel: a pixel's channels "
                                                            r"must be a multiple of 16 bytes, got "
                                                            r"120 bytes")
        self.refused(with_i2c(channels_per_pixel=128), I2C + r"\.channels_per_pixel: a pixel's "
                                                             r"channels \(256 bytes\) exceeds the "
                                                             r"swizzle span \(128 bytes\)")
        self.refused(with_i2c(channels_per_pixel=32, swizzle=32),
                     I2C + r"\.channels_per_pixel: .*\(64 bytes\) exceeds .*\(32 bytes\)")
        # Without a swizzle 256 channels (512 bytes) are fine; 257 are not, nor 0.
        parsed_map(with_i2c(channels_per_pixel=256, swizzle=0))
        self.refused(with_i2c(channels_per_pixel=257, swizzle=0),
                     I2C + r"\.channels_per_pixel: channels_per_pixel must be a whole number in "
                           r"1\.\.256, got 257")
        self.refused(with_i2c(channels_per_pixel=0), I2C + r"\.channels_per_pixel: .* 1\.\.256, got 0")
        self.refused(with_i2c(channels_per_pixel=64.5), I2C + r"\.channels_per_pixel: .*got 64\.5")
        # 16-byte units of the element type: 4 f32 channels are one.
        parsed_map(with_i2c(dtype="f32", channels_per_pixel=4))
        self.refused(with_i2c(dtype="f32", channels_per_pixel=2), I2C + r"\.channels_per_pixel: .*got "
                                                                       r"8 bytes")

    def test_pixels_per_column(self):
        self.refused(with_i2c(pixels_per_column=1025), I2C + r"\.pixels_per_column: pixels_per_column "
                                                             r"must be a whole number in 1\.\.1024, "
                                                             r"got 1025")
        self.refused(with_i2c(pixels_per_column=0), I2C + r"\.pixels_per_column: ")
        self.assertEqual(parsed_map(with_i2c(pixels_per_column=1024))["pixels_per_column"], 1024)

    def test_shared_limits(self):
        # What every map is held to, an im2col one too.
        self.refused(with_i2c(element_strides=[1, 1, 9, 1]), I2C + r"\.element_strides\[2\]: ")
        self.refused(with_i2c(strides=[128, 7160, 401408]), I2C + r"\.strides\[1\]: a stride must be")
        self.refused(with_i2c(swizzle=16), I2C + r"\.swizzle: ")
        self.refused(with_i2c(oob_fill="inf"), I2C + r"\.oob_fill: ")

    def test_extent(self):
        # The formula of a tiled map (dims and strides only): the whole [32, 56, 56, 64] f16
        # input, whatever the corners.
        self.assertEqual(tensor_map_extent(I2C_MAP), 32 * 56 * 56 * 64 * 2)
        self.assertEqual(tensor_map_extent(dict(I2C_MAP, lower_corner=[-128, -128],
                                                upper_corner=[127, 127])), 32 * 56 * 56 * 64 * 2)
        self.assertEqual(tensor_map_extent(dict(I2C_MAP, dims=[64, 100, 8], strides=[256, 25600])),
                         64 * 2 + 99 * 256 + 7 * 25600)
        hidetd.Kernel(None, conv_set(), CONV_REQUEST)
        # One image fewer in the request: the map reaches past input0.
        short = copy.deepcopy(CONV_REQUEST)
        short["inputs"][0]["shape"] = [31, 56, 56, 64]
        with self.assertRaisesRegex(hidetd.PlanError, r"kernel_set: input0 has 12443648 bytes, too "
                                                      r"few for the tensor map of input0 "
                                                      r"\(12845056 bytes\)"):
            hidetd.Kernel(None, conv_set(), short)


def plan_json(tmap):
    """A plan of one step whose kernel reads input0 (x, 64 KiB) through `tmap`."""
    return {"graph_key": "g", "arena_bytes": 0,
            "inputs": [{"name": "x", "shape": [128, 256], "dtype": "f16"},
                       {"name": "w", "shape": [256, 64], "dtype": "f16"}],
            "outputs": [{"name": "y", "shape": [128, 64], "dtype": "f16"}],
            "steps": [{"request": REQUEST, "kernel_set": kernel_set(tmap),
                       "bindings": {"input0": "x", "input1": "w", "output": "y"}}]}


class Plans(unittest.TestCase):
    def test_bound_buffer_smaller_than_map(self):
        p = hidetd.Plan(None, plan_json(A_MAP))
        self.assertEqual(p.steps[0].sources["input0"], ("input", "x"))
        # A map two rows taller than x, with a wider row pitch, reaches past it.
        tall = dict(A_MAP, dims=[256, 130], strides=[1024])
        with self.assertRaisesRegex(hidetd.PlanError, r"steps\[0\]\.bindings\.input0: 'x' has 65536 "
                                                      r"bytes, too few for the tensor map of input0 "
                                                      r"\(132608 bytes\)"):
            hidetd.Plan(None, plan_json(tall))

    def test_bound_buffer_smaller_than_im2col_map(self):
        # x as 4 images of 8x16 pixels of 64 f16 channels: 64 KiB, as much as it holds; a fifth
        # image reaches past it.
        fits = dict(I2C_MAP, dims=[64, 16, 8, 4], strides=[128, 2048, 16384])
        p = hidetd.Plan(None, plan_json(fits))
        self.assertEqual(p.steps[0].kernels[0][4][3][2], fits)
        with self.assertRaisesRegex(hidetd.PlanError, r"steps\[0\]\.bindings\.input0: 'x' has 65536 "
                                                      r"bytes, too few for the tensor map of input0 "
                                                      r"\(81920 bytes\)"):
            hidetd.Plan(None, plan_json(dict(fits, dims=[64, 16, 8, 5])))
        with self.assertRaisesRegex(hidetd.PlanError, r"steps\[0\]\.kernel_set\.kernels\[0\]\.params\[3\]"
                                                      r"\.tensor_map\.box: unknown member of an im2col"):
            hidetd.Plan(None, plan_json(dict(fits, box=[64, 1, 1, 1])))

    def test_damaged_map_in_a_plan(self):
        with self.assertRaisesRegex(hidetd.PlanError, r"steps\[0\]\.kernel_set\.kernels\[0\]\.params\[3\]"
                                                      r"\.tensor_map\.swizzle: "):
            hidetd.Plan(None, plan_json(dict(A_MAP, swizzle=16)))


class FakeLib:
    """Stands in for libcuda: records each launch's kernelParams (where each points, and the
    8 bytes there), each cuTensorMapEncodeTiled and each cuTensorMapEncodeIm2col (answering
    im2col_result)."""

    def __init__(self, im2col_result=0):
        self.launches = []
        self.encodes = []
        self.im2col_encodes = []
        self.im2col_result = im2col_result
        self.allocs = []

    def cuLaunchKernel(self, func, gx, gy, gz, bx, by, bz, shared, stream, argv, extra):
        self.launches.append((func, stream, [argv[i] for i in range(len(argv))],
                              [ctypes.c_uint64.from_address(argv[i]).value for i in range(len(argv))]))
        return 0

    def cuMemAlloc_v2(self, out, nbytes):
        self.allocs.append(nbytes)
        out._obj.value = 0x9000000 + 0x100000 * len(self.allocs)
        return 0

    def cuMemFree_v2(self, ptr):
        return 0

    def cuTensorMapEncodeTiled(self, out, dtype, rank, address, dims, strides, box, es, interleave,
                               swizzle, l2, oob):
        self.encodes.append((dtype, rank, address, list(dims), list(strides)[:rank - 1], list(box),
                             list(es), interleave, swizzle, l2, oob))
        # What a launch must then carry: the address this map was encoded for, marked so that it
        # differs from the pointer parameter's value.
        ctypes.c_uint64.from_address(out).value = MAP_MARK | address
        return 0

    def cuTensorMapEncodeIm2col(self, out, dtype, rank, address, dims, strides, lower, upper,
                                channels, pixels, es, interleave, swizzle, l2, oob):
        # The corner arrays whole: the encoder reads rank - 2 entries of each, no more.
        self.im2col_encodes.append((dtype, rank, address, list(dims), list(strides)[:rank - 1],
                                    list(lower), list(upper), channels, pixels, list(es),
                                    interleave, swizzle, l2, oob))
        if self.im2col_result:
            return self.im2col_result
        ctypes.c_uint64.from_address(out).value = I2C_MARK | address
        return 0


class FakeClient:
    def _module(self, key, device):
        return "module-" + key


class Launches(unittest.TestCase):
    def setUp(self):
        self.saved = _cuda._driver
        self.drv = _cuda._driver = FakeDriver(FakeLib())

    def tearDown(self):
        _cuda._driver = self.saved

    def check_launch(self, launch, a, b, y):
        func, stream, argv, values = launch
        self.assertEqual(func, "k_tma")
        self.assertEqual(values, [a, b, y, MAP_MARK | a])
        self.assertEqual(argv[3] % 64, 0)

    def mm_tensors(self):
        """REQUEST's a, b and output at 0x10000, 0x30000 and 0x50000."""
        return FakeTensor([128, 256], ptr=0x10000), FakeTensor([256, 64], ptr=0x30000), \
            FakeTensor([128, 64], ptr=0x50000)

    def test_kernel_encodes_per_address(self):
        k = hidetd.Kernel(FakeClient(), kernel_set(), REQUEST)
        a, b, y = self.mm_tensors()
        k(a, b, output=y, stream=3)
        k(a, b, output=y, stream=3)
        self.assertEqual(self.drv.lib.encodes, [(6, 2, 0x10000, [256, 128], [512], [64, 64], [1, 1],
                                                 0, 3, 3, 0)])
        a2 = FakeTensor([128, 256], ptr=0x70000)
        k(a2, b, output=y, stream=3)
        self.assertEqual([e[2] for e in self.drv.lib.encodes], [0x10000, 0x70000])
        launches = self.drv.lib.launches
        self.assertEqual(len(launches), 3)
        self.check_launch(launches[0], 0x10000, 0x30000, 0x50000)
        self.check_launch(launches[1], 0x10000, 0x30000, 0x50000)
        self.check_launch(launches[2], 0x70000, 0x30000, 0x50000)

    def test_plan_encodes_per_address(self):
        p = hidetd.Plan(FakeClient(), plan_json(A_MAP))
        w, y = FakeTensor([256, 64], ptr=0x30000), FakeTensor([128, 64], ptr=0x50000)
        for x in (0x10000, 0x10000, 0x90000):
            p.run({"x": FakeTensor([128, 256], ptr=x), "w": w}, outputs={"y": y}, stream=5)
        self.assertEqual([e[2] for e in self.drv.lib.encodes], [0x10000, 0x90000])
        for launch, x in zip(self.drv.lib.launches, (0x10000, 0x10000, 0x90000)):
            self.check_launch(launch, x, 0x30000, 0x50000)

    def test_workspace_map(self):
        # A pretransposed set: the workspace is allocated once, the first kernel gets its address
        # as a pointer, the second a map encoded at it.
        k = hidetd.Kernel(FakeClient(), pretransposed_set(), REQUEST)
        a, b, y = self.mm_tensors()
        k(a, b, output=y, stream=3)
        k(a, b, output=y, stream=3)
        ws = 0x9000000 + 0x100000
        self.assertEqual(self.drv.lib.allocs, [256 * 64 * 2])
        self.assertEqual(sorted(e[2] for e in self.drv.lib.encodes), [0x10000, ws])
        launches = self.drv.lib.launches
        self.assertEqual([(f, v) for f, _, _, v in launches],
                         [("k_bt", [0x30000, ws]), ("k_tma", [0x10000, 0x30000, 0x50000, MAP_MARK | 0x10000,
                                                               MAP_MARK | ws])] * 2)

    def test_driver_without_encoder(self):
        _cuda._driver = FakeDriver(FakeLib(), with_encoder=False)
        k = hidetd.Kernel(FakeClient(), kernel_set(), REQUEST)
        tensors = (FakeTensor([128, 256]), FakeTensor([256, 64]))
        with self.assertRaisesRegex(hidetd.CudaError, r"kernel k_tma takes tensor maps, and the CUDA "
                                                      r"driver lacks cuTensorMapEncodeTiled \(it needs "
                                                      r"a CUDA 12 driver or newer\)"):
            k(*tensors, output=FakeTensor([128, 64]))
        # A set without maps still launches.
        plain = kernel_set()
        plain["kernels"][0]["params"].pop()
        hidetd.Kernel(FakeClient(), plain, REQUEST)(*tensors, output=FakeTensor([128, 64]))
        self.assertEqual(len(_cuda._driver.lib.launches), 1)

    def conv_tensors(self, x=0x100000):
        return (FakeTensor([32, 56, 56, 64], ptr=x), FakeTensor([64, 576], ptr=0x30000)), \
            FakeTensor([32, 56, 56, 64], ptr=0x2000000)

    def test_im2col_encodes_per_address(self):
        k = hidetd.Kernel(FakeClient(), conv_set(), CONV_REQUEST)
        ins, y = self.conv_tensors()
        k(*ins, output=y, stream=3)
        k(*ins, output=y, stream=3)
        # cuTensorMapEncodeIm2col's arguments: f16 (6), rank 4, the address, dims, 3 strides,
        # 2 corners each, channels, pixels, element strides, no interleave, swizzle 128B (3),
        # no L2 promotion, zero fill.
        want = (6, 4, 0x100000, [64, 56, 56, 32], [128, 7168, 401408], [-1, -1], [-1, -1], 64, 128,
                [1, 1, 1, 1], 0, 3, 0, 0)
        self.assertEqual(self.drv.lib.im2col_encodes, [want])
        # The weights' tiled map, by the other encoder.
        self.assertEqual(self.drv.lib.encodes, [(6, 2, 0x30000, [576, 64], [1152], [64, 64], [1, 1],
                                                 0, 3, 3, 0)])
        ins2, _ = self.conv_tensors(x=0x4000000)
        k(*ins2, output=y, stream=3)
        self.assertEqual([e[2] for e in self.drv.lib.im2col_encodes], [0x100000, 0x4000000])
        self.assertEqual(len(self.drv.lib.encodes), 1)
        for launch, x in zip(self.drv.lib.launches, (0x100000, 0x100000, 0x4000000)):
            func, stream, argv, values = launch
            self.assertEqual((func, stream), ("k_conv", 3))
            self.assertEqual(values, [x, 0x30000, 0x2000000, I2C_MARK | x, MAP_MARK | 0x30000])
            self.assertEqual((argv[3] % 64, argv[4] % 64), (0, 0))
        self.assertEqual(len(self.drv.lib.launches), 3)

    def test_im2col_arguments_by_rank(self):
        # Rank 3 and rank 5, NaN fill, f32, L2 promotion: each array as long as the rank has
        # entries.
        cases = [
            (dict(I2C_MAP, dtype="f32", dims=[32, 100, 8], strides=[128, 12800],
                  element_strides=[1, 2, 1], lower_corner=[-32768], upper_corner=[32767],
                  channels_per_pixel=32, pixels_per_column=1024, swizzle=0, l2_promotion=128,
                  oob_fill="nan"),
             (7, 3, 0x10000, [32, 100, 8], [128, 12800], [-32768], [32767], 32, 1024, [1, 2, 1],
              0, 0, 2, 1)),
            (dict(I2C_MAP, dims=[64, 8, 8, 8, 2], strides=[128, 1024, 8192, 65536],
                  element_strides=[1, 1, 2, 1, 1], lower_corner=[-16, -3, 15],
                  upper_corner=[15, -7, 8], channels_per_pixel=32, swizzle=64, l2_promotion=64),
             (6, 5, 0x10000, [64, 8, 8, 8, 2], [128, 1024, 8192, 65536], [-16, -3, 15], [15, -7, 8],
              32, 128, [1, 1, 2, 1, 1], 0, 2, 1, 0)),
        ]
        for tmap, want in cases:
            self.drv.lib.im2col_encodes.clear()
            tm = self.drv.encode_tensor_map(parsed_map(kernel_set(tmap)), 0x10000)
            self.assertEqual(self.drv.lib.im2col_encodes, [want])
            self.assertEqual(tm.encoded_for, 0x10000)
            self.assertEqual(ctypes.c_uint64.from_address(tm.address).value, I2C_MARK | 0x10000)

    def test_plan_encodes_im2col_per_address(self):
        fits = dict(I2C_MAP, dims=[64, 16, 8, 4], strides=[128, 2048, 16384])
        p = hidetd.Plan(FakeClient(), plan_json(fits))
        w, y = FakeTensor([256, 64], ptr=0x30000), FakeTensor([128, 64], ptr=0x50000)
        for x in (0x10000, 0x10000, 0x90000):
            p.run({"x": FakeTensor([128, 256], ptr=x), "w": w}, outputs={"y": y}, stream=5)
        self.assertEqual([e[2:4] for e in self.drv.lib.im2col_encodes],
                         [(0x10000, [64, 16, 8, 4]), (0x90000, [64, 16, 8, 4])])
        self.assertEqual(self.drv.lib.encodes, [])
        self.assertEqual([ln[3][3] for ln in self.drv.lib.launches],
                         [I2C_MARK | 0x10000, I2C_MARK | 0x10000, I2C_MARK | 0x90000])

    def test_driver_without_im2col_encoder(self):
        # A driver with cuTensorMapEncodeTiled alone: a kernel with an im2col map is refused
        # before any launch, naming what is missing; one with tiled maps only still runs.
        _cuda._driver = FakeDriver(FakeLib(), with_im2col=False)
        k = hidetd.Kernel(FakeClient(), conv_set(), CONV_REQUEST)
        ins, y = self.conv_tensors()
        with self.assertRaisesRegex(hidetd.CudaError, r"kernel k_conv takes im2col tensor maps, and "
                                                      r"the CUDA driver lacks cuTensorMapEncodeIm2col "
                                                      r"\(it needs a CUDA 12 driver or newer\)"):
            k(*ins, output=y)
        self.assertEqual(_cuda._driver.lib.launches, [])
        with self.assertRaisesRegex(hidetd.CudaError, r"the kernel takes im2col tensor maps, and the "
                                                      r"CUDA driver lacks cuTensorMapEncodeIm2col"):
            _cuda._driver.encode_tensor_map(I2C_MAP, 0x10000)
        tensors = (FakeTensor([128, 256]), FakeTensor([256, 64]))
        hidetd.Kernel(FakeClient(), kernel_set(), REQUEST)(*tensors, output=FakeTensor([128, 64]))
        self.assertEqual([ln[0] for ln in _cuda._driver.lib.launches], ["k_tma"])
        self.assertEqual(len(_cuda._driver.lib.encodes), 1)

        # A library without the function at all reads the same.
        class TiledOnlyLib(FakeLib):
            cuTensorMapEncodeIm2col = None
        _cuda._driver = FakeDriver(TiledOnlyLib())
        with self.assertRaisesRegex(hidetd.CudaError, r"lacks cuTensorMapEncodeIm2col"):
            hidetd.Kernel(FakeClient(), conv_set(), CONV_REQUEST)(*ins, output=y)

    def test_failed_encode_names_the_encoder(self):
        # CUDA_ERROR_INVALID_VALUE from the im2col encoder: the message names it and the map's
        # essentials, and the map is not taken as encoded (the next launch tries again).
        drv = _cuda._driver = FakeDriver(FakeLib(im2col_result=1))
        drv.error_text = lambda r: "CUDA_ERROR_INVALID_VALUE (invalid argument)"
        k = hidetd.Kernel(FakeClient(), conv_set(), CONV_REQUEST)
        ins, y = self.conv_tensors()
        for _ in range(2):
            with self.assertRaisesRegex(hidetd.CudaError,
                                        r"^cuTensorMapEncodeIm2col\(f16 \[64, 56, 56, 32\], strides "
                                        r"\[128, 7168, 401408\], corners \[-1, -1\]\.\.\[-1, -1\], "
                                        r"64 channels x 128 pixels, for 0x100000\) failed: "
                                        r"CUDA_ERROR_INVALID_VALUE \(invalid argument\)$"):
                k(*ins, output=y)
        self.assertEqual(len(drv.lib.im2col_encodes), 2)
        self.assertEqual(drv.lib.launches, [])
        # The tiled encoder's failure names its own function and box.
        drv.lib.cuTensorMapEncodeTiled = lambda *args: 1
        drv.tensor_map_encode = drv.lib.cuTensorMapEncodeTiled
        with self.assertRaisesRegex(hidetd.CudaError, r"^cuTensorMapEncodeTiled\(f16 \[256, 128\], strides "
                                                      r"\[512\], box \[64, 64\], for 0x10000\) failed: "
                                                      r"CUDA_ERROR_INVALID_VALUE"):
            drv.encode_tensor_map(A_MAP, 0x10000)

    def test_tensor_map_alignment(self):
        maps = [_cuda.TensorMap() for _ in range(8)]
        for m in maps:
            self.assertEqual(m.address % 64, 0)
            ctypes.memset(m.address, 0xab, 128)
            self.assertEqual(m.raw(), b"\xab" * 128)
        self.assertIsNone(maps[0].encoded_for)


class RealDriver(unittest.TestCase):
    """Both encoders through libcuda itself, where a GPU is: the ctypes signatures as the driver
    reads them (a wrong one shows as CUDA_ERROR_INVALID_VALUE, or as a crash). Skipped without a
    GPU."""

    @classmethod
    def setUpClass(cls):
        try:
            drv = _cuda.Driver("libcuda.so.1")
            count = ctypes.c_int()
            drv.check(drv.lib.cuDeviceGetCount(ctypes.byref(count)), "cuDeviceGetCount")
        except hidetd.CudaError as e:
            raise unittest.SkipTest("no CUDA driver or GPU: %s" % e)
        if not count.value:
            raise unittest.SkipTest("no CUDA GPU")
        cls.drv = drv
        drv.use_device(0)

    def test_encode(self):
        drv = self.drv
        if drv.tensor_map_encode is None or drv.tensor_map_encode_im2col is None:
            self.skipTest("the driver lacks the tensor-map encoders (before CUDA 12)")
        buf = _cuda.DeviceBuffer(32 * 56 * 56 * 64 * 2, 0)
        five = dict(I2C_MAP, dims=[64, 8, 8, 8, 2], strides=[128, 1024, 8192, 65536],
                    element_strides=[1, 1, 2, 1, 1], lower_corner=[-16, -3, 15],
                    upper_corner=[15, -7, 8], channels_per_pixel=32, swizzle=64, l2_promotion=64)
        three = dict(I2C_MAP, dtype="f32", dims=[32, 100, 8], strides=[128, 12800],
                     element_strides=[1, 2, 1], lower_corner=[-300], upper_corner=[300],
                     channels_per_pixel=32, pixels_per_column=1024, swizzle=0, oob_fill="nan")
        for tmap in (I2C_MAP, five, three, A_MAP):
            tmap = parsed_map(kernel_set(tmap))
            a = drv.encode_tensor_map(tmap, buf.ptr).raw()
            b = drv.encode_tensor_map(tmap, buf.ptr + 256).raw()
            self.assertNotEqual(a, b)
            self.assertNotEqual(a, bytes(128))
        # A misaligned address is refused, naming the encoder.
        with self.assertRaisesRegex(hidetd.CudaError, r"^cuTensorMapEncodeIm2col\(f16 \[64, 56, 56, 32\], "
                                                      r".* failed: "):
            drv.encode_tensor_map(I2C_MAP, buf.ptr + 8)


if __name__ == "__main__":
    unittest.main()
