"""The Explore panel: a `kiln explore` run watched, its points applied and exported."""
