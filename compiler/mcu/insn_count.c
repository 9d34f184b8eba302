/* A QEMU TCG plugin (API v1) counting executed guest instructions, for `kiln bench --target`.
 *
 * Debian's QEMU 7.2 supports plugins but ships no qemu-plugin.h, so the few functions used are
 * declared here. Counting is on between a call of the `begin` marker and the next call of the
 * `end` marker (addresses given as arguments, Thumb bit cleared); the instructions of the
 * marker functions themselves are not counted. Each `begin` opens a new segment. Within
 * counting, instructions are also attributed to address ranges read from `regions` (a file of
 * "start end" lines, half-open, one per region). At exit it prints "total N", "segment I N"
 * and "region I N" lines through qemu_plugin_outs (the log: -d plugin -D FILE).
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS,
                            QEMU_PLUGIN_CB_RW_REGS };
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
                                           qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb,
                                          qemu_plugin_vcpu_udata_cb_t cb,
                                          enum qemu_plugin_cb_flags flags, void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb,
                                    void *userdata);
void qemu_plugin_outs(const char *string);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

#define MAX_REGIONS 4096
#define MAX_SEGMENTS 4096

static uint64_t begin_addr = UINT64_MAX, end_addr = UINT64_MAX;
static uint64_t region_start[MAX_REGIONS], region_end[MAX_REGIONS];
static int n_regions;
static uint64_t region_count[MAX_REGIONS], segment_count[MAX_SEGMENTS], total;
static int counting, segment = -1;

/* What one translated block adds when it runs: its instructions, split by region. */
struct block {
    uint64_t vaddr;
    uint32_t n_insns;
    int n_parts;
    struct { int region; uint32_t n; } parts[];
};

static int region_of(uint64_t addr)
{
    for (int i = 0; i < n_regions; i++)
        if (region_start[i] <= addr && addr < region_end[i])
            return i;
    return -1;
}

static void on_exec(unsigned int vcpu, void *userdata)
{
    const struct block *blk = userdata;
    (void)vcpu;
    if (blk->vaddr == begin_addr) {
        counting = 1;
        if (segment + 1 < MAX_SEGMENTS)
            segment++;
        return;
    }
    if (blk->vaddr == end_addr) {
        counting = 0;
        return;
    }
    if (!counting)
        return;
    total += blk->n_insns;
    segment_count[segment] += blk->n_insns;
    for (int i = 0; i < blk->n_parts; i++)
        region_count[blk->parts[i].region] += blk->parts[i].n;
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    size_t n = qemu_plugin_tb_n_insns(tb);
    struct block *blk = calloc(1, sizeof *blk + n * sizeof blk->parts[0]);
    (void)id;
    if (!blk)
        return;
    blk->vaddr = qemu_plugin_tb_vaddr(tb);
    blk->n_insns = (uint32_t)n;
    for (size_t i = 0; i < n; i++) {
        int r = region_of(qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, i)));
        if (r < 0)
            continue;
        if (blk->n_parts && blk->parts[blk->n_parts - 1].region == r) {
            blk->parts[blk->n_parts - 1].n++;
        } else {
            blk->parts[blk->n_parts].region = r;
            blk->parts[blk->n_parts].n = 1;
            blk->n_parts++;
        }
    }
    /* Blocks live as long as the translation may be reused: to the end of the run. */
    qemu_plugin_register_vcpu_tb_exec_cb(tb, on_exec, QEMU_PLUGIN_CB_NO_REGS, blk);
}

static void report(qemu_plugin_id_t id, void *userdata)
{
    char line[96];
    (void)id, (void)userdata;
    snprintf(line, sizeof line, "total %" PRIu64 "\n", total);
    qemu_plugin_outs(line);
    for (int i = 0; i <= segment && i < MAX_SEGMENTS; i++) {
        snprintf(line, sizeof line, "segment %d %" PRIu64 "\n", i, segment_count[i]);
        qemu_plugin_outs(line);
    }
    for (int i = 0; i < n_regions; i++) {
        snprintf(line, sizeof line, "region %d %" PRIu64 "\n", i, region_count[i]);
        qemu_plugin_outs(line);
    }
}

static int read_regions(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    while (n_regions < MAX_REGIONS && fscanf(f, "%" SCNx64 " %" SCNx64, &region_start[n_regions],
                                             &region_end[n_regions]) == 2)
        n_regions++;
    fclose(f);
    return 0;
}

__attribute__((visibility("default")))
int qemu_plugin_install(qemu_plugin_id_t id, const void *info, int argc, char **argv)
{
    (void)info;
    for (int i = 0; i < argc; i++) {
        if (!strncmp(argv[i], "begin=", 6))
            begin_addr = strtoull(argv[i] + 6, NULL, 0);
        else if (!strncmp(argv[i], "end=", 4))
            end_addr = strtoull(argv[i] + 4, NULL, 0);
        else if (!strncmp(argv[i], "regions=", 8) && read_regions(argv[i] + 8))
            return -1;
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, report, NULL);
    return 0;
}
