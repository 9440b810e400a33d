"""`hf-arith push` (a model on the Hub) and `hf-arith space build` (a Space folder)."""

from __future__ import annotations

from .common import MODEL_HELP, integer


def add_parsers(sub, parents) -> None:
    common, source = parents["common"], parents["source"]
    p = sub.add_parser("push", parents=[common, source], help="publish a model on the Hub (model card, remote code, weights)",
                       description="Build the exact folder that is uploaded (weights, config, tokenizer, remote code, "
                                   "model card, pictures), then upload it; --output-dir only builds it.")
    p.add_argument("model", metavar="MODEL", help=MODEL_HELP)
    p.add_argument("--repo-id", required=True, metavar="ORG/NAME", help="the Hub model repository")
    p.add_argument("--eval-json", metavar="PATH",
                   help="report of `hf-arith eval MODEL --json PATH` (default: the checkpoint's eval_results.json)")
    p.add_argument("--output-dir", metavar="DIR", help="build the folder here and do not upload")
    p.add_argument("--heatmap", metavar="PNG", help="picture to use instead of the per-length heatmap drawn from the report")
    p.add_argument("--grid-samples", type=integer, default=20, metavar="N",
                   help="problems per cell of the card's length grid (default: 20; 0: per-length accuracy only)")
    p.add_argument("--dataset-id", metavar="ORG/NAME", help="Hub dataset the model was evaluated on, for the card")
    p.add_argument("--private", action="store_true", help="create the repository as private")
    p.set_defaults(func=cmd_push)

    space = sub.add_parser("space", parents=[common], help="Hugging Face Spaces (the Gradio playground)")
    space_sub = space.add_subparsers(dest="space_command", metavar="SPACE_COMMAND", required=True)
    p = space_sub.add_parser("build", parents=[common], help="write a Space folder that runs the playground on Hub models",
                             description="Write app.py, requirements.txt (pinned to the installed versions) and a "
                                         "README.md Space card into DIR; the app loads each model by repo id through "
                                         "its remote code, without hf_arith. Every model must be in the local Hugging "
                                         "Face cache (downloaded or pushed from here), so that it is known to exist. "
                                         "Nothing is downloaded or uploaded.")
    p.add_argument("out_dir", metavar="DIR", help="the folder to write (new or empty)")
    p.add_argument("--model", action="append", required=True, metavar="ORG/NAME",
                   help="a Hub repo id of an hf_arith model (published with `hf-arith push`) that is in the local "
                        "Hugging Face cache; repeat for more")
    p.add_argument("--title", metavar="TEXT", help="the Space's title (default: hf_arith playground)")
    p.set_defaults(func=cmd_space_build)


def cmd_push(args) -> int:
    from ..publishing.hub_folder import push_model

    folder, url = push_model(args.model, args.repo_id, output_dir=args.output_dir, upload=args.output_dir is None,
                             revision=args.revision, trust_remote_code=args.trust_remote_code,
                             private=args.private, eval_json=args.eval_json, heatmap=args.heatmap,
                             dataset_id=args.dataset_id, grid_samples=args.grid_samples)
    if folder is not None:
        files = sorted(p for p in folder.rglob("*") if p.is_file())
        print(f"Built the upload folder for {args.repo_id} in {folder}: {len(files)} files")
        for path in files:
            print(f"  {path.relative_to(folder)}  ({path.stat().st_size:,} bytes)")
    if url:
        print(f"Pushed {args.model} to {url}")
    return 0


def cmd_space_build(args) -> int:
    from ..data.errors import CLIError
    from ..publishing.space_build import build_space, check_models
    from ..runtime.loading import cached_revisions

    # A repo id that is not in the local cache may not exist: the Space would fail when deployed.
    for repo_id in check_models(args.model):
        if not cached_revisions(repo_id):
            raise CLIError(f"--model {repo_id}: not in the local Hugging Face cache, so hf_arith cannot tell that the "
                           f"model exists; download it first (`hf download {repo_id}`) or check the name")
    folder = build_space(args.out_dir, args.model, title=args.title)
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    print(f"Built the Space folder for {', '.join(dict.fromkeys(args.model))} in {folder}: {len(files)} files")
    for path in files:
        print(f"  {path.relative_to(folder)}  ({path.stat().st_size:,} bytes)")
    print(f"Upload it with: hf upload ORG/SPACE_NAME {folder} . --repo-type space")
    return 0
