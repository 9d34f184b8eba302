"""The exports: bundles, the HTML report, pictures and walkthroughs."""
