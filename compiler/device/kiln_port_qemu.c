/* kiln_port_qemu.c: the porting layer for QEMU's Arm FPGA boards (mps2-an385, -an386, -an500,
 * -an505, mps3-an547). The serial link is the board's first CMSDK APB UART, polled; QEMU hands
 * it to `-serial tcp:127.0.0.1:PORT,server=on,wait=on`. Time comes from SysTick on the core
 * clock, widened to 64 bits by counting its wraps; QEMU implements no DWT, so the per-layer
 * unit is "SysTick ticks", deterministic when QEMU runs with `-icount shift=0`.
 *
 * The Makefile defines the board's addresses and clocks:
 *   KILN_UART_BASE   the UART's base address (0x40004000 on AN385/386/500, 0x40200000 on
 *                    AN505, 0x49303000 on AN547)
 *   KILN_UART_CLOCK  the UART's APB clock in Hz (it divides it by BAUDDIV)
 *   KILN_CPU_HZ      the core clock SysTick counts in Hz
 *   KILN_BAUD        the baud rate (default 115200; QEMU does not time it) */
#include "kiln_port.h"

#ifndef KILN_UART_BASE
#error "define KILN_UART_BASE, the CMSDK UART's base address"
#endif
#ifndef KILN_UART_CLOCK
#define KILN_UART_CLOCK 25000000u
#endif
#ifndef KILN_CPU_HZ
#define KILN_CPU_HZ 25000000u
#endif
#ifndef KILN_BAUD
#define KILN_BAUD 115200u
#endif

#define REG(address) (*(volatile uint32_t *)(address))
#define UART_DATA REG(KILN_UART_BASE + 0x00)
#define UART_STATE REG(KILN_UART_BASE + 0x04) /* bit 0 TX full, bit 1 RX full */
#define UART_CTRL REG(KILN_UART_BASE + 0x08)  /* bit 0 TX enable, bit 1 RX enable */
#define UART_BAUDDIV REG(KILN_UART_BASE + 0x10)
#define SYST_CSR REG(0xE000E010u)
#define SYST_RVR REG(0xE000E014u)
#define SYST_CVR REG(0xE000E018u)
#define SCB_ICSR REG(0xE000ED04u)
#define PENDSTSET (1u << 26)
#define SYSTICK_SPAN (1u << 24)

const char kiln_port_tick_unit[] = "SysTick ticks";
const uint32_t kiln_port_ticks_per_second = KILN_CPU_HZ;

static volatile uint32_t systick_wraps;

void SysTick_Handler(void) { systick_wraps++; }

void kiln_port_init(void)
{
    uint32_t divider = KILN_UART_CLOCK / KILN_BAUD;
    UART_BAUDDIV = divider < 16 ? 16 : divider; /* the UART needs at least 16 */
    UART_CTRL = 3u;
    SYST_RVR = SYSTICK_SPAN - 1;
    SYST_CVR = 0;
    SYST_CSR = 7u; /* enable, interrupt on wrap, core clock */
}

int kiln_port_read_byte(void)
{
    while (!(UART_STATE & 2u)) {
    }
    return (int)(UART_DATA & 0xFFu);
}

void kiln_port_write(const char *bytes, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        while (UART_STATE & 1u) {
        }
        UART_DATA = (uint8_t)bytes[i];
    }
}

uint64_t kiln_port_ticks(void)
{
    uint32_t primask;
    __asm volatile("mrs %0, primask\n\tcpsid i" : "=r"(primask)::"memory");
    uint32_t wraps = systick_wraps, value = SYST_CVR;
    if (SCB_ICSR & PENDSTSET) { /* wrapped, its interrupt not yet taken */
        value = SYST_CVR;
        wraps++;
    }
    __asm volatile("msr primask, %0" ::"r"(primask) : "memory");
    return (uint64_t)wraps * SYSTICK_SPAN + (SYSTICK_SPAN - 1 - value);
}

uint32_t kiln_port_microseconds(void)
{
    return (uint32_t)(kiln_port_ticks() / (KILN_CPU_HZ / 1000000u));
}
