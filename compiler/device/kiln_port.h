/* kiln_port.h: the porting layer of Kiln's runner firmware.
 *
 * The runner (kiln_runner.c) speaks the MLPerf Tiny benchmark's text protocol and Kiln's own
 * commands over a serial link, and needs six functions from the board. Kiln provides them for
 * QEMU's Arm boards (kiln_port_qemu.c); for another board, copy kiln_port_template.c and fill
 * in each function with the vendor HAL's calls. The split is the one MLPerf Tiny's
 * submitter_implemented.h makes: nothing else in the runner knows the board.
 */
#ifndef KILN_PORT_H
#define KILN_PORT_H

#include <stddef.h>
#include <stdint.h>

/* Set up the clocks the firmware relies on, the serial link (8N1, the baud the host opens
 * the port with; 115200 is MLPerf Tiny's and Kiln's default) and the counters below. Called
 * once, before any other function of the port. */
void kiln_port_init(void);

/* Wait for one byte from the host and return it (0..255). Polling is fine: the host sends
 * one command at a time and waits for the firmware's `m-ready` before the next. */
int kiln_port_read_byte(void);

/* Send `count` bytes to the host; return once they are handed to the UART. */
void kiln_port_write(const char *bytes, size_t count);

/* Microseconds from a free-running timer: MLPerf Tiny's `m-lap-us-` timestamps. It may wrap
 * at 2^32; the host takes differences. */
uint32_t kiln_port_microseconds(void);

/* A free-running 64-bit counter for per-layer timing: the core's cycle counter (DWT CYCCNT)
 * where there is one, else a timer's ticks. Each kernel call adds its advance to the
 * network's NET_layer_ticks[]. */
uint64_t kiln_port_ticks(void);

/* What one tick of kiln_port_ticks is, as the host prints it: "cycles" only for a cycle
 * counter, else the timer's name ("SysTick ticks"). */
extern const char kiln_port_tick_unit[];

/* Ticks of kiln_port_ticks per second (the core clock for DWT CYCCNT). */
extern const uint32_t kiln_port_ticks_per_second;

#endif
