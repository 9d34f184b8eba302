"""Code-generation targets and boards as data: a new target is a table row, not a branch."""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from functools import cache

from compiler.errors import KilnError
from compiler.memory.plan import HOST_ALIGNMENT, MCU_ALIGNMENT


class DotProduct(enum.Enum):
    """The int8 dot-product instructions of a core, which its int8 kernels are shaped around."""

    NONE = ""
    DSP = "dsp"  # SMLAD: two 16-bit products summed (Armv7E-M and Armv8-M DSP extension)
    MVE = "mve"  # VMLADAVA: sixteen 8-bit products summed (Armv8.1-M Helium)
    VNNI = "vnni"  # VPDPBUSD: four u8 x s8 products per 32-bit lane (AVX-512 VNNI)
    # VPMADDWD: two int16 products summed per 32-bit lane, exact (AVX2, AVX-512 without VNNI);
    # int8 inputs are sign-extended to int16 pairs, never VPMADDUBSW's saturating bytes.
    PMADDWD = "pmaddwd"
    SDOT = "sdot"  # SDOT: four s8 x s8 products per 32-bit lane (Armv8.2-A dot product)
    # One product per multiply-accumulate (MLA; MULS and ADDS on Armv6-M): cores without SIMD,
    # whose kernels keep a block of channels' accumulators in general registers.
    SCALAR = "scalar"

    def __bool__(self) -> bool:
        return self is not DotProduct.NONE


@dataclass(frozen=True)
class Target:
    """What LLVM needs to emit code for one CPU.

    Attributes:
        name: Kiln's name for the target (the CLI's `--target`).
        triple: LLVM target triple.
        cpu: LLVM CPU name ("" for the triple's default).
        features: LLVM feature string ("+a,-b").
        float_abi: "hard", "soft" or "softfp"; exported signatures are pointer-only, so it only
            documents how the object may be linked.
        vector_bits: Widest useful SIMD register, a hint for kernel shaping (0: scalar).
        mcu: True for bare-metal microcontrollers (weights stay in flash, no libc assumed).
        registers: Floating-point (vector) registers kernels may keep accumulators in.
        int8_dot: The int8 dot-product instructions kernels can target (`DotProduct`); the
            kernel table and the kernels dispatch on it, never on the target's name.
        requires: LLVM feature names a CPU must have to run the code (x86 levels): an object
            for a named x86 CPU runs on this machine only when its CPU has them all.
        int8_dot_emulated: Whether `int8_dot`'s instruction (VPDPBUSD) is replaced by portable
            IR with the same result, so kernels shaped for it run on a CPU of `requires` that
            lacks it. For tests only: AVX-512 VNNI's kernels, but for the one instruction,
            checked on AVX2 machines (no emulator of AVX-512 is at hand), never faster.
        lean_weights: On DSP cores, int8 weights stay bytes, widened by SXTB16 in the kernel
            (half the flash; Cortex-M7: 7 % more instructions on ad01, about a fifth more on
            the convolutional models), instead of ready int16 pairs.
            None (the default) weighs the cost per model and core (`auto_lean_weights`).
        usual_flash: Flash of the core's usual parts (1 MB for Cortex-M4 and M33, 2 MB for
            M7), which the automatic weight layout measures weights against.
        c_compiler: The C compiler a user builds a program around its objects with (the
            export's build line); `c_flags`: that compiler's CPU, FPU and float ABI flags.
    """

    name: str
    triple: str
    cpu: str = ""
    features: str = ""
    float_abi: str = "hard"
    vector_bits: int = 0
    mcu: bool = False
    registers: int = 16
    int8_dot: DotProduct = DotProduct.NONE
    requires: tuple[str, ...] = ()
    int8_dot_emulated: bool = False
    c_compiler: str = "cc"
    c_flags: tuple[str, ...] = ()
    lean_weights: bool | None = None
    usual_flash: int = 0

    @property
    def alignment(self) -> int:
        """Default alignment of every memory region and arena buffer for this target.

        A cache line on hosted CPUs; 16 bytes on microcontrollers, whose RAM is scarce and whose
        widest access (LDRD, VLDM, an MVE vector) needs no more.
        """
        return MCU_ALIGNMENT if self.mcu else HOST_ALIGNMENT

    @property
    def int16_pairs(self) -> bool:
        """Whether int8 weights are stored widened to int16 pairs (DSP cores, unless lean)."""
        return self.int8_dot is DotProduct.DSP and not self.lean_weights

    @property
    def kernel_level(self) -> str:
        """The instruction-set level its kernels are built for, as a benchmark prints it."""
        dots = {DotProduct.VNNI: "int8 VPDPBUSD", DotProduct.PMADDWD: "int8 VPMADDWD",
                DotProduct.SDOT: "int8 SDOT",
                DotProduct.DSP: "int8 SMLAD", DotProduct.MVE: "int8 VMLADAV",
                DotProduct.SCALAR: "int8 MLA"}
        dot = dots.get(self.int8_dot, "int8 generic vectors")
        if self.triple.startswith("x86_64"):
            isa = {512: "AVX-512", 256: "AVX2"}.get(self.vector_bits, "SSE2")
            if self.int8_dot is DotProduct.VNNI:
                isa += " VNNI" if self.vector_bits >= 512 else " with AVX-VNNI"
            return f"{isa} ({self.vector_bits}-bit vectors, {dot})"
        return f"{self.cpu or self.triple} ({dot})"

    @property
    def float64_requant(self) -> bool:
        """Whether the tflite rule is requantized in float64 (`requant.tflite_float64`).

        On CPUs with 256-bit or wider vectors: a float64 multiply, select and floor per
        lane cost less than the 64-bit integer lanes of the fixed-point form (which AVX2
        cannot even shift arithmetically).
        """
        return not self.mcu and self.vector_bits >= 256

    @property
    def int8_residual_in_store(self) -> bool:
        """Whether an int8 residual Add is done in its convolution's store, over the residual.

        Not on Helium: there the Add, four lanes to a register in a kernel of its own, runs
        faster than in the store of a convolution that needs those registers (ResNet-8:
        1.7 % more instructions fused); elsewhere the fused form costs at most about 1 % (a
        residual block on Cortex-M7) and saves a tensor of arena (ResNet-8: 49,152 ->
        32,768 B).
        """
        return self.int8_dot is not DotProduct.MVE

    @property
    def inline_streaming(self) -> bool:
        """Whether a kernel whose output overlaps the input it streams from is inlined.

        Such a kernel's output and input carry no `noalias`. Inlined on Helium, its stores
        then cost more than the call (KWS: 1.6 %, VWW: 2.6 % more instructions; as functions
        of their own, 0.1 % and 0.3 %); on Cortex-M7 inlining still pays (KWS: 0.3 % fewer).
        """
        return self.int8_dot is not DotProduct.MVE


# `--weight-layout` and the export dialog's choice, as `Target.lean_weights` (None: automatic).
WEIGHT_LAYOUTS = {"int8": True, "int16": False}


# The automatic layout keeps weights int8 when int16 pairs would take more than this share of
# the core's usual flash: the application, its stack and its data need the rest.
LEAN_SHARE = 0.25


def auto_lean_weights(target: Target, weight_bytes: int) -> Target:
    """`target` with its weight layout decided, for a network of `weight_bytes` int8 weights.

    A DSP core whose layout is not set keeps weights int8 when their int16 pairs would take
    more than LEAN_SHARE of its usual flash (ad01's 264 KB on any core, VWW's 208 KB on
    Cortex-M4 and M33), and stores pairs otherwise (the faster code).
    """
    if target.int8_dot is not DotProduct.DSP or target.lean_weights is not None:
        return target
    return replace(target, lean_weights=2 * weight_bytes > LEAN_SHARE * target.usual_flash)


@dataclass(frozen=True)
class Board:
    """A development board: its CPU, the memory a bundle must fit, and how QEMU runs it.

    One row holds all Kiln knows of a board, so the budget `--board` checks and the memory map
    firmware is linked with cannot disagree (`compiler.mcu.firmware` writes the map from it).

    Attributes:
        name: Board name (the CLI's `--board`).
        target: Name of its CPU target.
        flash: Flash bytes (code, read-only data, weights).
        ram: RAM bytes usable for data, the arena, heap and stack.
        qemu_machine: QEMU's `-M` name when qemu-system-arm emulates the board, else None.
        flash_origin: Address of flash in the emulated board's memory map.
        ram_origin: Address of RAM in the emulated board's memory map.
        cflags: arm-none-eabi-gcc flags the emulated board's firmware is built with.
        uart: Base address of the emulated board's first CMSDK UART (the serial link the
            runner firmware speaks over; QEMU hands it to `-serial`).
        uart_clock: That UART's APB clock in Hz (it divides it by BAUDDIV).
        cpu_hz: The core clock SysTick counts, in Hz.
    """

    name: str
    target: str
    flash: int
    ram: int
    qemu_machine: str | None = None
    flash_origin: int | None = None
    ram_origin: int | None = None
    cflags: tuple[str, ...] = ()
    uart: int | None = None
    uart_clock: int = 25_000_000
    cpu_hz: int = 25_000_000

    def __post_init__(self):
        """Refuse a half-filled row: an emulated board needs its memory map and flags."""
        emulated = (self.flash_origin is not None, self.ram_origin is not None,
                    bool(self.cflags))
        if self.qemu_machine is not None and not all(emulated):
            raise ValueError(f"board {self.name}: QEMU runs it, so it needs flash_origin, "
                             "ram_origin and cflags")


def _host() -> Target:
    """The machine running Kiln, from LLVM's own detection (so host objects can use AVX)."""
    import llvmlite.binding as llvm

    features = llvm.get_host_cpu_features().flatten()
    has = {f"+{name}" for name in host_cpu_features()}
    if "+avx512f" in has and "+avx512bw" in has:
        # Some AVX-512 CPUs are tuned to prefer 256-bit vectors, which would split every
        # 16-lane accumulator in two; the kernels are shaped for the full register file.
        dot = DotProduct.VNNI if "+avx512vnni" in has else DotProduct.PMADDWD
        return Target("host", llvm.get_process_triple(), llvm.get_host_cpu_name(),
                      features + ",-prefer-256-bit", "hard", 512, registers=32, int8_dot=dot)
    if llvm.get_process_triple().startswith(("aarch64", "arm64")):
        dot = DotProduct.SDOT if "+dotprod" in has else DotProduct.NONE
        features += ",+dotprod" if dot else ""
        return Target("host", llvm.get_process_triple(), llvm.get_host_cpu_name(), features,
                      "hard", 128, registers=32, int8_dot=dot)
    if "+avx2" in has:
        # AVX-VNNI (Intel client cores since Alder Lake): VPDPBUSD on 256-bit registers.
        dot = DotProduct.VNNI if "+avxvnni" in has else DotProduct.PMADDWD
        return Target("host", llvm.get_process_triple(), llvm.get_host_cpu_name(), features,
                      "hard", 256, int8_dot=dot)
    return Target("host", llvm.get_process_triple(), llvm.get_host_cpu_name(), features,
                  "hard", 128)


_X86 = "x86_64-unknown-linux-gnu"
_AVX512 = ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq")
_ARM_CC = "arm-none-eabi-gcc"
_SOFT, _FPV5 = ("-mthumb", "-mfloat-abi=soft"), ("-mthumb", "-mfloat-abi=hard",
                                                 "-mfpu=fpv5-sp-d16")
_KIB, _MIB = 1024, 1024 * 1024
_TARGETS = (
    Target("x86-64", _X86, "x86-64", "", "hard", 128, c_compiler="x86_64-linux-gnu-gcc"),
    # x86 hosts by instruction-set level, each with the kernels the host detection would pick
    # there: AVX2 (Haswell and later, AMD Zen), AVX-512 without and with VNNI. Objects for
    # them are compiled on any machine and run where the CPU has the features.
    Target("x86-64-v3", _X86, "x86-64-v3", "", "hard", 256, int8_dot=DotProduct.PMADDWD,
           requires=("avx2", "fma", "bmi2")),
    # AVX2 with AVX-VNNI, no AVX-512: Intel client cores since Alder Lake (VPDPBUSD, 8 lanes).
    Target("alderlake", _X86, "alderlake", "", "hard", 256, int8_dot=DotProduct.VNNI,
           requires=("avx2", "fma", "bmi2", "avxvnni")),
    Target("skylake-avx512", _X86, "skylake-avx512", "-prefer-256-bit", "hard", 512,
           registers=32, int8_dot=DotProduct.PMADDWD, requires=_AVX512),
    Target("icelake-server", _X86, "icelake-server", "-prefer-256-bit", "hard", 512,
           registers=32, int8_dot=DotProduct.VNNI, requires=(*_AVX512, "avx512vnni")),
    Target("cortex-m0plus", "thumbv6m-none-eabi", "cortex-m0plus", "", "soft", 0, True,
           int8_dot=DotProduct.SCALAR, c_compiler=_ARM_CC,
           c_flags=("-mcpu=cortex-m0plus", *_SOFT)),
    Target("cortex-m3", "thumbv7m-none-eabi", "cortex-m3", "", "soft", 0, True,
           int8_dot=DotProduct.SCALAR, c_compiler=_ARM_CC,
           c_flags=("-mcpu=cortex-m3", *_SOFT)),
    Target("cortex-m4", "thumbv7em-none-eabihf", "cortex-m4", "+vfp4d16sp", "hard", 0, True,
           registers=32, int8_dot=DotProduct.DSP, c_compiler=_ARM_CC,
           c_flags=("-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"),
           usual_flash=1 * _MIB),
    Target("cortex-m7", "thumbv7em-none-eabihf", "cortex-m7", "+fp-armv8d16sp,-fp64", "hard", 0,
           True, registers=32, int8_dot=DotProduct.DSP, c_compiler=_ARM_CC,
           c_flags=("-mcpu=cortex-m7", *_FPV5), usual_flash=2 * _MIB),
    Target("cortex-m33", "thumbv8m.main-none-eabihf", "cortex-m33", "+fp-armv8d16sp,-fp64",
           "hard", 0, True, registers=32, int8_dot=DotProduct.DSP, c_compiler=_ARM_CC,
           c_flags=("-mcpu=cortex-m33", *_FPV5), usual_flash=1 * _MIB),
    Target("cortex-m55", "thumbv8.1m.main-none-eabihf", "cortex-m55", "+mve.fp", "hard", 128,
           True, registers=8, int8_dot=DotProduct.MVE, c_compiler=_ARM_CC,
           c_flags=("-mcpu=cortex-m55", "-mthumb", "-mfloat-abi=hard", "-mfpu=auto")),
    Target("aarch64", "aarch64-unknown-linux-gnu", "generic", "+neon", "hard", 128,
           registers=32, c_compiler="aarch64-linux-gnu-gcc"),
    # Armv8.2-A and later with the dot product (Raspberry Pi 5's Cortex-A76, Graviton 2 and
    # later, Apple silicon): int8 kernels on SDOT.
    Target("aarch64-dotprod", "aarch64-unknown-linux-gnu", "generic", "+neon,+dotprod",
           "hard", 128, registers=32, int8_dot=DotProduct.SDOT, requires=("dotprod",),
           c_compiler="aarch64-linux-gnu-gcc"),
    Target("riscv32", "riscv32-unknown-none-elf", "generic-rv32", "+m,+f", "soft", 0, True,
           int8_dot=DotProduct.SCALAR, c_compiler="riscv32-unknown-elf-gcc",
           c_flags=("-march=rv32imf", "-mabi=ilp32")),
)

# Kiln marks its Arm objects Tag_ABI_VFP_args "compatible" (they pass no floats across calls and
# inline their math), so emulated firmware is built the way a user's would be: hard float.
_HARD_FPV5 = ("-mthumb", "-mfloat-abi=hard", "-mfpu=fpv5-sp-d16")
BOARDS = {b.name: b for b in (
    Board("stm32f746g-disco", "cortex-m7", 1 * _MIB, 320 * _KIB),
    Board("nrf52840-dk", "cortex-m4", 1 * _MIB, 256 * _KIB),
    Board("imxrt1060-evk", "cortex-m7", 8 * _MIB, 1 * _MIB),
    # QEMU's Arm FPGA images. AN385 and AN500: 4 MB ZBT SSRAM1 at 0 (code), 4 MB SSRAM2/3.
    Board("mps2-an385", "cortex-m3", 4 * _MIB, 4 * _MIB, "mps2-an385", 0x0, 0x2000_0000,
          ("-mcpu=cortex-m3", "-mthumb", "-mfloat-abi=soft"), 0x4000_4000),
    # AN386: AN385's memory map with a Cortex-M4 (single-precision FPU).
    Board("mps2-an386", "cortex-m4", 4 * _MIB, 4 * _MIB, "mps2-an386", 0x0, 0x2000_0000,
          ("-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"), 0x4000_4000),
    Board("mps2-an500", "cortex-m7", 4 * _MIB, 4 * _MIB, "mps2-an500", 0x0, 0x2000_0000,
          ("-mcpu=cortex-m7", *_HARD_FPV5), 0x4000_4000),
    # AN505 and AN547 start the core in the secure aliases. AN505: 4 MB SSRAM0 (code), 2 MB
    # SSRAM1; AN547: 512 KB ITCM (vectors, code, weights), DDR (data, arena, heap and stack).
    # QEMU clocks AN505's core and APB at 20 MHz, AN547's core (so SysTick) at 32 MHz and its
    # APB at 25 MHz (hw/arm/mps2-tz.c).
    Board("mps2-an505", "cortex-m33", 4 * _MIB, 2 * _MIB, "mps2-an505", 0x1000_0000,
          0x3800_0000, ("-mcpu=cortex-m33", *_HARD_FPV5), 0x4020_0000, 20_000_000, 20_000_000),
    Board("mps3-an547", "cortex-m55", 512 * _KIB, 4 * _MIB, "mps3-an547", 0x1000_0000,
          0x7000_0000, ("-mcpu=cortex-m55", "-mthumb", "-mfloat-abi=hard"), 0x4930_3000,
          25_000_000, 32_000_000),
)}


def host_cpu_features() -> frozenset[str]:
    """The LLVM feature names this machine's CPU has (without the leading '+').

    LLVM's detection from Linux's /proc/cpuinfo on AArch64 knows only a few features; the
    dot product (the kernel's "asimddp") is read from the file here.
    """
    import llvmlite.binding as llvm

    names = {f[1:] for f in llvm.get_host_cpu_features().flatten().split(",")
             if f.startswith("+")}
    if llvm.get_process_triple().startswith(("aarch64", "arm64")) and _cpuinfo_has("asimddp"):
        names.add("dotprod")
    return frozenset(names)


def _cpuinfo_has(flag: str) -> bool:
    """Whether a "Features" (or "flags") line of /proc/cpuinfo names `flag`."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            return any(flag in line.split(":", 1)[-1].split() for line in info
                       if line.lower().startswith(("features", "flags")))
    except OSError:
        return False


def missing_on_this_cpu(target: Target) -> list[str]:
    """The features `target`'s code needs that this machine's CPU lacks (empty: it runs here).

    Only x86 levels name features; other targets' objects are refused by their machine type.
    """
    return sorted(set(target.requires) - host_cpu_features())


def target_names() -> list[str]:
    """Every target name, host first."""
    return ["host"] + [t.name for t in _TARGETS]


@cache
def get_target(name: str) -> Target:
    """The target called `name`, or the CPU target of the board called `name`."""
    if name == "host":
        return _host()
    if name in BOARDS:
        return get_target(BOARDS[name].target)
    for target in _TARGETS:
        if target.name == name:
            return target
    known = ", ".join(target_names() + list(BOARDS))
    raise KilnError(f"unknown target {name!r} (known: {known})")
