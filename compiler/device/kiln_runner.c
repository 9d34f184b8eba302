/* kiln_runner.c: Kiln's runner firmware. It answers MLPerf Tiny's performance-mode protocol
 * (commands end with '%', every reply ends with "m-ready") and Kiln's own commands in the same
 * style, so the host can load a tensor, run the network, read its outputs and per-layer times.
 *
 *   name                 m-name-dut-[kiln]
 *   profile              m-profile-[...], m-model-[MODEL]
 *   timestamp            m-lap-us-N
 *   db load N            m-[Expecting N bytes]: the next `db HEX` commands fill N input bytes
 *   db HEX               appends the bytes; m-load-done once all N arrived
 *   db print             m-buffer-xx-xx-... (8 bytes a line)
 *   infer N W            W warm-up runs, then N timed runs between two m-lap-us- lines, results
 *   results              m-results-[f,f,...]: every output element, dequantized, %0.3f
 *   kiln-id              the network's identity: hash, version, inputs, outputs, counters
 *   kiln-out             m-kiln-out-I-HEX...: output I's raw bytes from the last run
 *   kiln-layers          one run, then m-kiln-layer-K-TICKS per kernel call and the whole
 *
 * The board is reached only through kiln_port.h; the network only through kiln_model.h. A
 * command longer than the buffer is dropped whole and answered with an error, never written
 * past the buffer's end. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kiln_model.h"
#include "kiln_port.h"

#ifndef KILN_CMD_SIZE
#define KILN_CMD_SIZE 256 /* command characters, '%' excluded; MLPerf Tiny's runner needs 80 */
#endif

static char command[KILN_CMD_SIZE];
static size_t command_length;
static int command_overrun;
static uint8_t db_buffer[KILN_INPUT_BYTES > 0 ? KILN_INPUT_BYTES : 1];
static uint32_t db_expected, db_received;
static int have_run;

/* Markers the QEMU instruction-counting plugin starts and stops at (kiln-layers calls them
 * around its run); on a board they are two empty calls. */
__attribute__((noinline, used)) void kiln_count_begin(void) { __asm volatile(""); }
__attribute__((noinline, used)) void kiln_count_end(void) { __asm volatile(""); }

static void put(const char *text) { kiln_port_write(text, strlen(text)); }

static void put_u64(uint64_t value)
{
    char digits[21];
    int n = 0;
    do {
        digits[n++] = (char)('0' + value % 10);
        value /= 10;
    } while (value);
    char out[21];
    for (int i = 0; i < n; i++)
        out[i] = digits[n - 1 - i];
    kiln_port_write(out, (size_t)n);
}

static void put_hex8(uint8_t value)
{
    static const char hex[] = "0123456789abcdef";
    char out[2] = {hex[value >> 4], hex[value & 15]};
    kiln_port_write(out, 2);
}

/* %0.3f, as MLPerf Tiny's reference prints results; nan and inf spelled out. */
static void put_float3(float value)
{
    if (value != value) {
        put("nan");
        return;
    }
    if (value < 0) {
        put("-");
        value = -value;
    }
    if (value > 1.8e19f) {
        put("inf");
        return;
    }
    uint64_t thousandths = (uint64_t)((double)value * 1000.0 + 0.5);
    put_u64(thousandths / 1000);
    char frac[4] = {'.', (char)('0' + thousandths / 100 % 10), (char)('0' + thousandths / 10 % 10),
                    (char)('0' + thousandths % 10)};
    kiln_port_write(frac, 4);
}

static void line(const char *text)
{
    put(text);
    put("\r\n");
}

static void error(const char *text, const char *detail)
{
    put("e-[");
    put(text);
    put(detail);
    line("]");
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* A decimal argument; -1 when absent, -2 when not a number. */
static long number(const char *text)
{
    while (*text == ' ')
        text++;
    if (!*text)
        return -1;
    long value = 0;
    for (; *text && *text != ' '; text++) {
        if (*text < '0' || *text > '9' || value > 100000000L)
            return -2;
        value = value * 10 + (*text - '0');
    }
    return value;
}

static const char *word_after(const char *text)
{
    while (*text && *text != ' ')
        text++;
    while (*text == ' ')
        text++;
    return text;
}

static int starts(const char *text, const char *prefix)
{
    size_t n = strlen(prefix);
    return strncmp(text, prefix, n) == 0 && (text[n] == 0 || text[n] == ' ');
}

static void timestamp(void)
{
    put("m-lap-us-");
    put_u64(kiln_port_microseconds());
    put("\r\n");
}

/* MLPerf Tiny's th_load_tensor: the loaded bytes into the network's inputs. */
static int load_tensor(void)
{
    if (db_received != KILN_INPUT_BYTES) {
        put("e-[infer: the input holds ");
        put_u64(db_received);
        put(" of ");
        put_u64(KILN_INPUT_BYTES);
        line(" bytes; send db load first]");
        return 0;
    }
    kiln_model_load(db_buffer);
    return 1;
}

static void results(void)
{
    if (!have_run) {
        line("e-[results: no inference has run yet]");
        return;
    }
    put("m-results-[");
    int first = 1;
    for (unsigned o = 0; o < KILN_OUTPUT_COUNT; o++) {
        for (uint32_t k = 0; k < kiln_outputs[o].count; k++) {
            if (!first)
                put(",");
            first = 0;
            put_float3(kiln_model_output_value(o, k));
        }
    }
    line("]");
}

static void db_command(const char *args)
{
    if (starts(args, "load")) {
        long n = number(word_after(args));
        if (n < 0) {
            line("e-[db load: give the byte count, as `db load N`]");
            return;
        }
        if ((unsigned long)n != KILN_INPUT_BYTES) {
            put("e-[db load: ");
            put_u64((uint64_t)n);
            put(" bytes asked; the network's inputs take ");
            put_u64(KILN_INPUT_BYTES);
            line("]");
            db_expected = db_received = 0;
            return;
        }
        db_expected = (uint32_t)n;
        db_received = 0;
        put("m-[Expecting ");
        put_u64((uint64_t)n);
        line(" bytes]");
        return;
    }
    if (starts(args, "print")) {
        for (uint32_t i = 0; i < db_received; i += 8) {
            put("m-buffer");
            for (uint32_t j = i; j < i + 8 && j < db_received; j++) {
                put("-");
                put_hex8(db_buffer[j]);
            }
            put("\r\n");
        }
        return;
    }
    size_t digits = strlen(args);
    if (digits % 2) {
        line("e-[db: an odd number of hex digits]");
        return;
    }
    if (db_received + digits / 2 > db_expected) {
        line("e-[db: more bytes than db load announced]");
        return;
    }
    for (size_t i = 0; i < digits; i += 2) {
        int hi = hex_value(args[i]), lo = hex_value(args[i + 1]);
        if (hi < 0 || lo < 0) {
            line("e-[db: not a hex byte]");
            return;
        }
        db_buffer[db_received++] = (uint8_t)(hi << 4 | lo);
    }
    if (db_received == db_expected)
        line("m-load-done");
}

static void infer(const char *args)
{
    long runs = number(args), warmups = number(word_after(args));
    if (runs == -1)
        runs = 1;
    if (warmups == -1)
        warmups = 10; /* MLPerf Tiny's default */
    if (runs < 1 || warmups < 0) {
        line("e-[infer: give N >= 1 runs and W >= 0 warm-ups, as `infer N W`]");
        return;
    }
    if (!load_tensor())
        return;
    put("m-warmup-start-");
    put_u64((uint64_t)warmups);
    put("\r\n");
    for (long i = 0; i < warmups; i++) {
        kiln_model_load(db_buffer);
        kiln_model_run();
    }
    line("m-warmup-done");
    put("m-infer-start-");
    put_u64((uint64_t)runs);
    put("\r\n");
    timestamp();
    int status = 0;
    for (long i = 0; i < runs; i++) {
        kiln_model_load(db_buffer);
        status |= kiln_model_run();
    }
    timestamp();
    line("m-infer-done");
    have_run = 1;
    if (status)
        line("e-[infer: the network returned a non-zero status]");
    results();
}

static void identity(void)
{
    put("m-kiln-id-[");
    put(KILN_MODEL_HASH);
    line("]");
    put("m-kiln-version-[");
    put(KILN_VERSION);
    line("]");
    put("m-kiln-net-[");
    put(KILN_NET_NAME);
    put(",");
    put(KILN_TARGET);
    put(",");
    put(KILN_BOARD);
    line("]");
    put("m-kiln-buffer-[");
    put_u64(KILN_CMD_SIZE);
    put(",");
    put_u64(KILN_INPUT_BYTES);
    line("]");
    for (unsigned i = 0; i < KILN_INPUT_COUNT; i++) {
        put("m-kiln-input-");
        put_u64(i);
        put("-[");
        put(kiln_inputs[i].description);
        line("]");
    }
    for (unsigned o = 0; o < KILN_OUTPUT_COUNT; o++) {
        put("m-kiln-output-");
        put_u64(o);
        put("-[");
        put(kiln_outputs[o].description);
        line("]");
    }
    put("m-kiln-ticks-[");
    put(kiln_port_tick_unit);
    put(",");
    put_u64(kiln_port_ticks_per_second);
    put(",");
    put_u64(KILN_LAYER_SLOTS);
    line("]");
}

static void raw_outputs(void)
{
    if (!have_run) {
        line("e-[kiln-out: no inference has run yet]");
        return;
    }
    for (unsigned o = 0; o < KILN_OUTPUT_COUNT; o++) {
        const uint8_t *bytes = kiln_outputs[o].address;
        for (uint32_t i = 0; i < kiln_outputs[o].bytes; i += 32) {
            put("m-kiln-out-");
            put_u64(o);
            put("-");
            for (uint32_t j = i; j < i + 32 && j < kiln_outputs[o].bytes; j++)
                put_hex8(bytes[j]);
            put("\r\n");
        }
    }
}

static void layers(void)
{
    if (!load_tensor())
        return;
    kiln_model_clear_ticks();
    kiln_count_begin();
    int status = kiln_model_run();
    kiln_count_end();
    have_run = 1;
    for (unsigned k = 0; k < KILN_LAYER_SLOTS; k++) {
        put("m-kiln-layer-");
        put_u64(k);
        put("-");
        put_u64(kiln_model_ticks(k));
        put("\r\n");
    }
    if (status)
        line("e-[kiln-layers: the network returned a non-zero status]");
}

static void dispatch(char *text)
{
    while (*text == ' ' || *text == '\r' || *text == '\n')
        text++;
    if (!*text) {
    } else if (starts(text, "name")) {
        line("m-name-dut-[kiln]");
    } else if (starts(text, "profile")) {
        line("m-profile-[ULPMark for tinyML Firmware V0.0.1]");
        put("m-model-[");
        put(KILN_MODEL_ID);
        line("]");
    } else if (starts(text, "timestamp")) {
        timestamp();
    } else if (starts(text, "db")) {
        db_command(word_after(text));
    } else if (starts(text, "infer")) {
        infer(word_after(text));
    } else if (starts(text, "results")) {
        results();
    } else if (starts(text, "kiln-id")) {
        identity();
    } else if (starts(text, "kiln-out")) {
        raw_outputs();
    } else if (starts(text, "kiln-layers")) {
        layers();
    } else if (starts(text, "help")) {
        line("m-[name profile timestamp db infer results kiln-id kiln-out kiln-layers]");
    } else {
        error("Unknown command: ", text);
    }
    line("m-ready");
}

/* One byte from the host (MLPerf Tiny's ee_serial_callback). */
static void received(char c)
{
    if (c == '%') {
        if (command_overrun) {
            put("e-[Command too long: the buffer holds ");
            put_u64(KILN_CMD_SIZE - 1);
            line(" characters]");
            line("m-ready");
        } else {
            command[command_length] = 0;
            dispatch(command);
        }
        command_length = 0;
        command_overrun = 0;
        return;
    }
    if (command_length + 1 >= KILN_CMD_SIZE) {
        command_overrun = 1;
        return;
    }
    command[command_length++] = c;
}

int main(void)
{
    kiln_port_init();
    kiln_model_reset();
    line("m-init-done");
    line("m-ready");
    for (;;)
        received((char)kiln_port_read_byte());
}
