"""Publishing: what leaves the machine.

Holds the Hub folder of a model and its upload (`hub_folder`), the model card (`model_card`), the
Gradio Space build (`space_build`, from the app in `space_app/`), the AdderBoard single-file
export (`adderboard`), the submission folder around it (`adderboard_folder`: parameter table, verify
scores, training command, leaderboard row) and the leaderboard row (`leaderboard`).

May import every layer below it (data, models, runtime, training records, evaluation) and the
top-level helpers; never the CLI.
"""
