/* kiln_port_template.c: the porting layer for your own board. Copy it beside the runner,
 * fill in each function with your vendor HAL's calls (the comments say what each must do),
 * and build with `make PORT=kiln_port_template.c` (or your copy's name). kiln_port.h states
 * the contract; kiln_port_qemu.c is a complete port for QEMU's boards to compare with.
 *
 * The host opens the port at 115200 baud, 8N1, no flow control, unless given --baud. */
#include "kiln_port.h"

/* TODO: your core clock in Hz (SystemCoreClock on CMSIS devices). */
#ifndef KILN_CPU_HZ
#define KILN_CPU_HZ 100000000u
#endif

/* DWT CYCCNT counts core cycles on Cortex-M3/M4/M7/M33/M55 (not on M0/M0+). Keep "cycles"
 * only when kiln_port_ticks reads it; a timer's ticks are named after the timer. */
const char kiln_port_tick_unit[] = "cycles";
const uint32_t kiln_port_ticks_per_second = KILN_CPU_HZ;

#define DEMCR (*(volatile uint32_t *)0xE000EDFCu)
#define DWT_CTRL (*(volatile uint32_t *)0xE0001000u)
#define DWT_CYCCNT (*(volatile uint32_t *)0xE0001004u)
#define DWT_LAR (*(volatile uint32_t *)0xE0001FB0u)

static uint32_t last_cycles, cycle_wraps;

void kiln_port_init(void)
{
    /* TODO: clocks (HAL_Init, SystemClock_Config), then the UART the host is cabled to:
     * 8N1 at 115200 baud, receiver and transmitter on. */

    /* The cycle counter: trace on, unlock (Cortex-M7), count. */
    DEMCR |= 1u << 24;
    DWT_LAR = 0xC5ACCE55u;
    DWT_CYCCNT = 0;
    DWT_CTRL |= 1u;
}

int kiln_port_read_byte(void)
{
    /* TODO: block until the UART has received a byte, then return it, e.g.
     *   uint8_t c; HAL_UART_Receive(&huart, &c, 1, HAL_MAX_DELAY); return c; */
    return -1;
}

void kiln_port_write(const char *bytes, size_t count)
{
    /* TODO: send the bytes, e.g. HAL_UART_Transmit(&huart, (uint8_t *)bytes, count, 1000); */
    (void)bytes;
    (void)count;
}

uint64_t kiln_port_ticks(void)
{
    /* CYCCNT wraps every 2^32 cycles (43 s at 100 MHz): widened here by noting each wrap,
     * which holds while the port is asked at least once a wrap period. */
    uint32_t now = DWT_CYCCNT;
    if (now < last_cycles)
        cycle_wraps++;
    last_cycles = now;
    return (uint64_t)cycle_wraps << 32 | now;
}

uint32_t kiln_port_microseconds(void)
{
    /* TODO: a microsecond timer of your HAL if it has one; the cycle counter serves too. */
    return (uint32_t)(kiln_port_ticks() / (KILN_CPU_HZ / 1000000u));
}
