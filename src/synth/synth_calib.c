/* synth_calib.c — the real calibration: the recipe's reference path over the original. Kept in
 * its own file so that code linking nd_synth_run with another calibrator does not need the
 * pipeline. */
#include "pipeline/pipeline.h"
#include "synth/synth.h"

int nd_synth_pipeline_calibrate(void *calib_user, const char *ckpt_dir, const char *recipe,
                                const int64_t *tokens, int64_t ntok, nd_synth_amax_cb cb, void *user,
                                nd_err *e) {
    (void)calib_user;
    return nd_pipeline_calibrate(ckpt_dir, recipe, tokens, ntok, cb, user, e);
}
