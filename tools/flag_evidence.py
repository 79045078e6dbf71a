"""The rows of ``tools/flag_table.py``: option -> (kind, evidence).

A **test** row names pytest node ids under ``parity_tests/`` in which the option changes an
output that is pinned; ``python tools/mutation_sweep.py --flags`` resets the option to its
default right after parsing and one of them must fail.  An **inert** row says why the option
cannot change an output; an **untested** row what is missing (issue 53 is open while one is).
"""

T, N, U = "test", "inert", "untested"

EVIDENCE: dict[str, tuple[str, tuple[str, ...] | str]] = {
    # -- groundhog-port
    "groundhog-port --log-level": (
        T,
        ("cli/test_model_options.py::test_log_level_hides_the_info_lines",),
    ),
    "groundhog-port --log-time": (
        T,
        ("cli/test_cli_interface.py::test_log_time_stamps_log_lines",),
    ),
    "groundhog-port --threads": (
        N,
        "torch's CPU threads: how fast, not what is computed (docs/speed.md); the words and the files are the same at any count, costs within the parity bounds",
    ),
    "groundhog-port --parse-budget-mib": (
        T,
        ("cli/test_global_options.py::test_parse_budget_mib_bounds_what_a_file_may_take",),
    ),
    # -- inspect
    "inspect --state": (
        T,
        (
            "cli/test_cli.py::test_inspect_reports_zero_missing_or_unknown",
            "cli/test_cli.py::test_inspect_text_report",
            "cli/test_cli_interface.py::test_model_and_changes_the_same_way_in_every_command",
        ),
    ),
    "inspect MODEL": (
        T,
        ("cli/test_model_options.py::test_inspect_shows_the_changes_and_the_models_arrays",),
    ),
    "inspect CHANGES": (
        T,
        ("cli/test_model_options.py::test_inspect_shows_the_changes_and_the_models_arrays",),
    ),
    "inspect --model": (
        T,
        (
            "cli/test_model_options.py::test_inspect_shows_the_changes_and_the_models_arrays[--model]",
        ),
    ),
    "inspect --changes": (
        T,
        (
            "cli/test_model_options.py::test_inspect_shows_the_changes_and_the_models_arrays[--changes]",
        ),
    ),
    "inspect --strict": (
        T,
        ("cli/test_model_options.py::test_strict_refuses_a_typo_in_every_command[inspect]",),
    ),
    "inspect --data-dir": (
        T,
        (
            "cli/test_model_options.py::test_data_dir_finds_the_vocabularies_of_a_moved_state[inspect]",
        ),
    ),
    "inspect --json": (
        T,
        (
            "cli/test_cli.py::test_inspect_reports_zero_missing_or_unknown",
            "hardening/test_hardening.py::test_inspect_json_with_values_json_cannot_hold",
        ),
    ),
    # -- score
    "score --state": (
        T,
        (
            "cli/test_cli.py::test_score_txt_explains_inf_once_without_numpy_warnings",
            "cli/test_cli_interface.py::test_score_txt_writes_its_scores_file",
        ),
    ),
    "score MODEL": (
        T,
        ("cli/test_model_options.py::test_model_and_changes_reach_the_scores[words]",),
    ),
    "score CHANGES": (
        T,
        ("cli/test_model_options.py::test_model_and_changes_reach_the_scores[words]",),
    ),
    "score --model": (
        T,
        ("cli/test_model_options.py::test_model_and_changes_reach_the_scores[--model]",),
    ),
    "score --changes": (
        T,
        ("cli/test_model_options.py::test_model_and_changes_reach_the_scores[--changes]",),
    ),
    "score --strict": (
        T,
        ("cli/test_model_options.py::test_strict_refuses_a_typo_in_every_command[score]",),
    ),
    "score --checkpoint": (T, ("export/test_export.py::test_cli_export_translate_score_fixture",)),
    "score --data-dir": (T, ("unit/test_lookup.py::test_missing_file_names_data_dir",)),
    "score --device": (
        T,
        ("cli/test_model_options.py::test_device_is_used_by_every_command[score]",),
    ),
    "score --lenient": (
        T,
        ("cli/test_model_options.py::test_lenient_is_container_load_in_every_command[score]",),
    ),
    "score --allow-nonfinite": (
        T,
        (
            "cli/test_model_options.py::test_allow_nonfinite_runs_a_model_with_nan_in_every_command[score]",
        ),
    ),
    "score --stable-softmax": (
        T,
        (
            "cli/test_model_options.py::test_stable_softmax_is_shift_invariant_and_finite_where_the_original_overflows",
        ),
    ),
    "score --src": (
        T,
        (
            "cli/test_cli.py::test_score_txt_explains_inf_once_without_numpy_warnings",
            "cli/test_cli_interface.py::test_score_txt_writes_its_scores_file",
        ),
    ),
    "score --trg": (
        T,
        (
            "cli/test_cli.py::test_score_txt_explains_inf_once_without_numpy_warnings",
            "cli/test_cli_interface.py::test_score_txt_writes_its_scores_file",
        ),
    ),
    "score --scores": (
        T,
        (
            "cli/test_cli_interface.py::test_score_txt_writes_its_scores_file",
            "cli/test_distributed.py::test_score_h5_two_processes_identical",
        ),
    ),
    "score --print-probs": (
        T,
        ("cli/test_model_options.py::test_print_probs_prints_exp_of_the_scores_in_float32",),
    ),
    "score --allow-unk": (
        T,
        (
            "cli/test_cli.py::test_score_txt_explains_inf_once_without_numpy_warnings",
            "cli/test_cli_interface.py::test_score_txt_writes_its_scores_file",
        ),
    ),
    "score --mode": (
        T,
        (
            "cli/test_cli.py::test_score_txt_explains_inf_once_without_numpy_warnings",
            "cli/test_cli_interface.py::test_score_txt_writes_its_scores_file",
            "cli/test_cli_interface.py::test_missing_matplotlib_is_said_before_anything_is_loaded",
        ),
    ),
    "score --n-batches": (T, ("cli/test_distributed.py::test_score_h5_two_processes_identical",)),
    "score --verbose": (T, ("cli/test_cli_interface.py::test_score_txt_writes_its_scores_file",)),
    "score --y-noise": (
        T,
        ("cli/test_search_options.py::test_y_noise_replaces_target_words_as_score_py",),
    ),
    "score --workers": (
        T,
        (
            "cli/test_workers.py::test_score_workers_write_what_one_process_writes",
            "cli/test_workers.py::test_what_score_workers_cannot_do_is_refused",
        ),
    ),
    "score --resume": (T, ("cli/test_resume.py::test_score_batch_resume",)),
    "score --progress": (
        N,
        "the progress line or bar on stderr only (shown on a terminal anyway): no file, stdout or exit status changes",
    ),
    "score --plot-alignment": (
        T,
        (
            "cli/test_cli_interface.py::test_missing_matplotlib_is_said_before_anything_is_loaded",
            "unit/test_plots.py::test_missing_matplotlib_is_a_clear_error_before_any_work",
        ),
    ),
    "score --plot-tree": (
        T,
        (
            "unit/test_grconv.py::test_score_plot_tree_writes_one_png_per_sentence",
            "unit/test_grconv.py::test_plot_tree_refuses_a_gru_encoder",
        ),
    ),
    "score --format": (T, ("unit/test_plots.py::test_score_plots_take_format_and_dpi",)),
    "score --dpi": (T, ("cli/test_plot_options.py::test_dpi_sets_the_pictures_pixels[score]",)),
    "score --tree-threshold": (
        T,
        ("cli/test_plot_options.py::test_tree_threshold_leaves_out_the_light_edges",),
    ),
    # -- translate
    "translate --state": (T, ("cli/test_cli.py::test_empty_source_file_warns",)),
    "translate MODEL": (
        T,
        ("cli/test_model_options.py::test_model_and_changes_reach_the_output[translate-words]",),
    ),
    "translate CHANGES": (
        T,
        ("cli/test_model_options.py::test_model_and_changes_reach_the_output[translate-words]",),
    ),
    "translate --model": (
        T,
        ("cli/test_model_options.py::test_model_and_changes_reach_the_output[translate---model]",),
    ),
    "translate --changes": (
        T,
        (
            "cli/test_model_options.py::test_model_and_changes_reach_the_output[translate---changes]",
        ),
    ),
    "translate --strict": (
        T,
        ("cli/test_model_options.py::test_strict_refuses_a_typo_in_every_command[translate]",),
    ),
    "translate --checkpoint": (
        T,
        (
            "cli/test_what_users_type.py::test_export_takes_out_dir_as_archive_does",
            "cli/test_what_users_type.py::test_inspect_names_a_file_that_is_not_a_model",
            "export/test_export.py::test_bad_checkpoint_dirs",
        ),
    ),
    "translate --data-dir": (
        T,
        (
            "cli/test_model_options.py::test_data_dir_finds_the_vocabularies_of_a_moved_state[translate]",
        ),
    ),
    "translate --device": (
        T,
        ("cli/test_model_options.py::test_device_is_used_by_every_command[translate]",),
    ),
    "translate --lenient": (
        T,
        ("cli/test_model_options.py::test_lenient_is_container_load_in_every_command[translate]",),
    ),
    "translate --allow-nonfinite": (
        T,
        (
            "cli/test_model_options.py::test_allow_nonfinite_runs_a_model_with_nan_in_every_command[translate]",
        ),
    ),
    "translate --stable-softmax": (
        T,
        (
            "cli/test_model_options.py::test_stable_softmax_decodes_where_the_original_overflows[translate]",
        ),
    ),
    "translate --beam-search": (
        T,
        (
            "cli/test_cli.py::test_empty_source_file_warns",
            "cli/test_distributed.py::test_sentences_the_original_crashed_on_give_the_single_process_outcome",
        ),
    ),
    "translate --beam-size": (
        T,
        ("cli/test_search_options.py::test_translate_writes_the_recorded_lines[beam_size]",),
    ),
    "translate --ignore-unk": (
        T,
        ("cli/test_search_options.py::test_translate_writes_the_recorded_lines[ignore_unk]",),
    ),
    "translate --source": (
        T,
        (
            "cli/test_cli.py::test_empty_source_file_warns",
            "cli/test_distributed.py::test_sentences_the_original_crashed_on_give_the_single_process_outcome",
            "cli/test_distributed.py::test_dead_rank_fails_then_resume_finishes",
        ),
    ),
    "translate --trans": (
        T,
        (
            "cli/test_cli.py::test_empty_source_file_warns",
            "cli/test_distributed.py::test_sentences_the_original_crashed_on_give_the_single_process_outcome",
            "cli/test_distributed.py::test_dead_rank_fails_then_resume_finishes",
        ),
    ),
    "translate --normalize": (
        T,
        ("cli/test_search_options.py::test_translate_writes_the_recorded_lines[normalize]",),
    ),
    "translate --verbose": (
        T,
        ("parity/test_sampling.py::test_verbose_parsed_input_shows_the_states_oov",),
    ),
    "translate --n-best": (
        T,
        ("cli/test_search_options.py::test_n_best_lists_the_originals_hypotheses_in_its_order",),
    ),
    "translate --workers": (
        T,
        (
            "cli/test_workers.py::test_workers_write_what_one_process_and_the_literal_loop_write",
            "cli/test_workers.py::test_workers_auto_counts_the_free_cores",
        ),
    ),
    "translate --batch-size": (
        T,
        (
            "cli/test_search_options.py::test_translate_batch_size_default_follows_the_beam",
            "cli/test_distributed.py::test_dead_rank_fails_then_resume_finishes",
            "cli/test_distributed.py::test_resume_of_another_run_is_refused_on_every_rank",
        ),
    ),
    "translate --resume": (
        T,
        (
            "cli/test_distributed.py::test_dead_rank_fails_then_resume_finishes",
            "cli/test_distributed.py::test_resume_of_another_run_is_refused_on_every_rank",
        ),
    ),
    "translate --progress": (
        N,
        "the progress line or bar on stderr only (shown on a terminal anyway): no file, stdout or exit status changes",
    ),
    "translate --n-samples": (
        T,
        (
            "cli/test_cli.py::test_usage_errors_are_one_line",
            "parity/test_sampling.py::test_usage_errors",
            "parity/test_sampling.py::test_verbose_parsed_input_shows_the_states_oov",
        ),
    ),
    "translate --alpha": (
        T,
        ("cli/test_search_options.py::test_alpha_is_the_samplers_inverse_temperature",),
    ),
    "translate --seed": (T, ("parity/test_sampling.py::test_usage_errors",)),
    # -- bleu
    "bleu --hyp": (T, ("cli/test_cli_interface.py::test_help_and_bleu_do_not_import_torch",)),
    "bleu --ref": (T, ("cli/test_cli_interface.py::test_help_and_bleu_do_not_import_torch",)),
    "bleu --tokenize": (T, ("unit/test_bleu_cli.py::test_bleu_flag_equals_the_sacrebleu_cli",)),
    "bleu --lowercase": (T, ("unit/test_bleu_cli.py::test_bleu_flag_equals_the_sacrebleu_cli",)),
    "bleu --multi-bleu": (
        T,
        (
            "cli/test_cli_interface.py::test_log_time_stamps_log_lines",
            "cli/test_sgml.py::test_bleu_on_sgml_is_sacrebleu_on_the_plain_text",
        ),
    ),
    "bleu --unescape": (T, ("unit/test_bleu_cli.py::test_bleu_flag_equals_the_sacrebleu_cli",)),
    "bleu --json": (T, ("unit/test_bleu_cli.py::test_bleu_flag_equals_the_sacrebleu_cli",)),
    # -- reproduce
    "reproduce --case": (
        T,
        (
            "cli/test_lab_archive.py::test_reproduce_case_says_the_vocabulary_is_missing",
            "cli/test_lab_habits.py::test_reproduce_case_finds_state_model_and_outputs_by_content",
        ),
    ),
    "reproduce --state": (
        T,
        ("cli/test_lab_habits.py::test_reproduce_case_finds_state_model_and_outputs_by_content",),
    ),
    "reproduce MODEL": (
        T,
        ("cli/test_model_options.py::test_model_and_changes_reach_the_output[reproduce-words]",),
    ),
    "reproduce CHANGES": (
        T,
        ("cli/test_model_options.py::test_model_and_changes_reach_the_output[reproduce-words]",),
    ),
    "reproduce --model": (
        T,
        ("cli/test_model_options.py::test_model_and_changes_reach_the_output[reproduce---model]",),
    ),
    "reproduce --changes": (
        T,
        (
            "cli/test_model_options.py::test_model_and_changes_reach_the_output[reproduce---changes]",
        ),
    ),
    "reproduce --strict": (
        T,
        ("cli/test_model_options.py::test_strict_refuses_a_typo_in_every_command[reproduce]",),
    ),
    "reproduce --checkpoint": (
        T,
        ("export/test_export.py::test_cli_reproduce_case_with_reloaded_model",),
    ),
    "reproduce --data-dir": (
        T,
        (
            "cli/test_lab_archive.py::test_reproduce_case_says_the_vocabulary_is_missing",
            "cli/test_lab_habits.py::test_reproduce_case_finds_state_model_and_outputs_by_content",
        ),
    ),
    "reproduce --device": (
        T,
        ("cli/test_model_options.py::test_device_is_used_by_every_command[reproduce]",),
    ),
    "reproduce --lenient": (
        T,
        ("cli/test_model_options.py::test_lenient_is_container_load_in_every_command[reproduce]",),
    ),
    "reproduce --allow-nonfinite": (
        T,
        (
            "cli/test_model_options.py::test_allow_nonfinite_runs_a_model_with_nan_in_every_command[reproduce]",
        ),
    ),
    "reproduce --stable-softmax": (
        T,
        (
            "cli/test_model_options.py::test_stable_softmax_decodes_where_the_original_overflows[reproduce]",
        ),
    ),
    "reproduce --source": (
        T,
        ("hardening/test_evidence.py::test_reproduce_save_dir_never_replaces_the_archived_files",),
    ),
    "reproduce --ref": (T, ("cli/test_search_options.py::test_reproduce_reference_and_max_diffs",)),
    "reproduce --archived-trans": (
        T,
        ("hardening/test_evidence.py::test_reproduce_save_dir_never_replaces_the_archived_files",),
    ),
    "reproduce --beam-size": (
        T,
        (
            "cli/test_search_options.py::test_reproduce_finds_the_recorded_lines_identical[beam_size]",
        ),
    ),
    "reproduce --normalize": (
        T,
        (
            "cli/test_search_options.py::test_reproduce_finds_the_recorded_lines_identical[normalize]",
        ),
    ),
    "reproduce --ignore-unk": (
        T,
        (
            "cli/test_search_options.py::test_reproduce_finds_the_recorded_lines_identical[ignore_unk]",
        ),
    ),
    "reproduce --batch-size": (
        N,
        "how many sentences the batched search decodes together: the same words at any batch size (parity/test_frozen_outputs.py, batch 1 and 32; the batched search against the literal one, test_legacy_cases.py)",
    ),
    "reproduce --tokenize": (
        T,
        ("cli/test_reproduce.py::test_the_bleu_tokenizer_given_is_the_one_used",),
    ),
    "reproduce --max-diffs": (
        T,
        ("cli/test_search_options.py::test_reproduce_reference_and_max_diffs",),
    ),
    "reproduce --save-dir": (
        T,
        (
            "cli/test_testsets.py::test_reproduce_case_writes_the_archived_files",
            "hardening/test_evidence.py::test_reproduce_save_dir_never_replaces_the_archived_files",
        ),
    ),
    "reproduce --json": (
        T,
        (
            "cli/test_lab_habits.py::test_reproduce_case_finds_state_model_and_outputs_by_content",
            "cli/test_packed.py::test_reproduce_case_of_a_pack",
            "cli/test_testsets.py::test_holdout_hints_name_what_serves_a_holdout_set",
        ),
    ),
    "reproduce --progress": (
        N,
        "the progress line or bar on stderr only (shown on a terminal anyway): no file, stdout or exit status changes",
    ),
    # -- parity
    "parity --case": (
        T,
        (
            "cli/test_testsets.py::test_parity_case_finds_a_renamed_test_set",
            "export/test_export.py::test_cli_parity_case_on_reloaded_model",
            "export/test_export.py::test_cli_parity_forward_groups_on_reloaded_model",
        ),
    ),
    "parity --state": (
        T,
        ("cli/test_model_options.py::test_parity_takes_the_model_and_changes_and_strict",),
    ),
    "parity MODEL": (
        T,
        ("cli/test_model_options.py::test_parity_takes_the_model_and_changes_and_strict",),
    ),
    "parity CHANGES": (
        T,
        ("cli/test_model_options.py::test_parity_takes_the_model_and_changes_and_strict",),
    ),
    "parity --model": (
        T,
        ("cli/test_model_options.py::test_parity_takes_the_model_and_changes_and_strict",),
    ),
    "parity --changes": (
        T,
        ("cli/test_model_options.py::test_parity_takes_the_model_and_changes_and_strict",),
    ),
    "parity --strict": (
        T,
        ("cli/test_model_options.py::test_parity_takes_the_model_and_changes_and_strict",),
    ),
    "parity --checkpoint": (
        T,
        ("cli/test_parity_options.py::test_checkpoint_is_compared_with_the_recording",),
    ),
    "parity --trace": (
        T,
        ("cli/test_model_options.py::test_parity_takes_the_model_and_changes_and_strict",),
    ),
    "parity --source": (
        T,
        ("cli/test_parity_options.py::test_source_and_target_name_the_test_set",),
    ),
    "parity --target": (
        T,
        ("cli/test_parity_options.py::test_source_and_target_name_the_test_set",),
    ),
    "parity --data-dir": (
        T,
        (
            "cli/test_testsets.py::test_parity_case_finds_a_renamed_test_set",
            "unit/test_lookup.py::test_pytest_plugin_takes_a_data_dir",
        ),
    ),
    "parity --device": (T, ("cli/test_model_options.py::test_device_is_used_by_parity_and_train",)),
    "parity --only": (T, ("cli/test_testsets.py::test_parity_case_finds_a_renamed_test_set",)),
    "parity --outputs": (T, ("cli/test_parity_options.py::test_outputs_folder_and_matching",)),
    "parity --outputs-matching": (
        T,
        ("cli/test_parity_options.py::test_outputs_folder_and_matching",),
    ),
    "parity --beam-labels": (
        T,
        (
            "cli/test_parity_cli.py::test_not_covered_rows_the_recording_cannot_tell_apart_exit_0_and_are_named",
            "cli/test_parity_cli.py::test_bad_input_exit_2",
        ),
    ),
    "parity --float64-reference": (
        T,
        ("cli/test_parity_options.py::test_float64_reference_adds_the_noise_columns",),
    ),
    "parity --allow-uncovered": (
        T,
        (
            "cli/test_parity_cli.py::test_a_recorded_group_the_port_does_not_compare_exits_1_unless_allowed",
            "cli/test_parity_cli.py::test_recorder_stand_in_trace_passes_parity",
        ),
    ),
    "parity --json": (
        T,
        (
            "hardening/test_evidence.py::test_parity_json_never_replaces_the_trace",
            "hardening/test_tree_walks.py::test_parity_json_of_a_case_whose_name_is_not_utf8",
        ),
    ),
    "parity --progress": (
        N,
        "the progress line or bar on stderr only (shown on a terminal anyway): no file, stdout or exit status changes",
    ),
    # -- train
    "train --state": (
        T,
        ("cli/test_cli_interface.py::test_messages_say_what_is_wrong_and_how_to_fix_it",),
    ),
    "train --proto": (
        T,
        (
            "parity/test_training_fidelity.py::test_train_proto_max_updates_0_writes_groundhogs_initial_model",
        ),
    ),
    "train MODEL": (
        T,
        ("cli/test_model_options.py::test_train_takes_the_model_and_changes[words]",),
    ),
    "train CHANGES": (
        T,
        ("cli/test_model_options.py::test_train_takes_the_model_and_changes[words]",),
    ),
    "train --model": (
        T,
        ("cli/test_model_options.py::test_train_takes_the_model_and_changes[--model]",),
    ),
    "train --changes": (
        T,
        ("cli/test_model_options.py::test_train_takes_the_model_and_changes[--changes]",),
    ),
    "train --strict": (T, ("cli/test_model_options.py::test_train_strict_refuses_a_typo",)),
    "train --data-dir": (
        T,
        (
            "cli/test_cli_interface.py::test_messages_say_what_is_wrong_and_how_to_fix_it",
            "cli/test_what_users_type.py::test_train_with_options_after_the_model_and_the_changes",
        ),
    ),
    "train --device": (T, ("cli/test_model_options.py::test_device_is_used_by_parity_and_train",)),
    "train --max-updates": (
        T,
        (
            "cli/test_what_users_type.py::test_train_with_options_after_the_model_and_the_changes",
            "cli/test_what_users_type.py::test_train_at_loop_iters_says_so_and_how_to_go_on",
        ),
    ),
    "train --keep-accumulators": (
        T,
        ("cli/test_what_users_type.py::test_inspect_names_a_file_that_is_not_a_model",),
    ),
    # -- plot-training
    "plot-training TIMINGS": (
        T,
        (
            "cli/test_cli_frictions.py::test_plot_training_takes_options_in_any_order",
            "cli/test_cli_frictions.py::test_plot_training_ambiguous_labels_are_one_line",
        ),
    ),
    "plot-training --out": (
        T,
        ("cli/test_cli_frictions.py::test_plot_training_takes_options_in_any_order",),
    ),
    "plot-training --format": (
        T,
        ("cli/test_plot_options.py::test_format_chooses_the_picture_format",),
    ),
    "plot-training --dpi": (
        T,
        ("cli/test_plot_options.py::test_dpi_sets_the_pictures_pixels[plot-training]",),
    ),
    "plot-training --y": (
        T,
        ("cli/test_plot_options.py::test_the_printed_average_is_analysis_pys[y-window-label]",),
    ),
    "plot-training --window": (
        T,
        ("cli/test_plot_options.py::test_the_printed_average_is_analysis_pys[y-window-label]",),
    ),
    "plot-training --start": (
        T,
        ("cli/test_plot_options.py::test_the_printed_average_is_analysis_pys[start-finish]",),
    ),
    "plot-training --finish": (
        T,
        ("cli/test_plot_options.py::test_the_printed_average_is_analysis_pys[start-finish]",),
    ),
    "plot-training --hours": (
        T,
        ("cli/test_plot_options.py::test_the_printed_average_is_analysis_pys[hours]",),
    ),
    "plot-training --labels": (
        T,
        ("cli/test_cli_frictions.py::test_plot_training_takes_options_in_any_order",),
    ),
    "plot-training --label": (
        T,
        ("cli/test_plot_options.py::test_the_printed_average_is_analysis_pys[y-window-label]",),
    ),
    # -- serve
    "serve --state": (T, ("serve/test_serve_api.py::test_serve_port_in_use_is_one_line",)),
    "serve MODEL": (
        T,
        (
            "serve/test_serve_options.py::test_model_changes_data_dir_and_checkpoint_reach_the_server",
        ),
    ),
    "serve CHANGES": (
        T,
        (
            "serve/test_serve_options.py::test_model_changes_data_dir_and_checkpoint_reach_the_server",
        ),
    ),
    "serve --model": (
        T,
        (
            "serve/test_serve_options.py::test_model_changes_data_dir_and_checkpoint_reach_the_server",
        ),
    ),
    "serve --changes": (
        T,
        (
            "serve/test_serve_options.py::test_model_changes_data_dir_and_checkpoint_reach_the_server",
        ),
    ),
    "serve --strict": (T, ("serve/test_serve_options.py::test_loading_options_reach_the_server",)),
    "serve --checkpoint": (
        T,
        (
            "serve/test_serve_options.py::test_model_changes_data_dir_and_checkpoint_reach_the_server",
        ),
    ),
    "serve --data-dir": (
        T,
        (
            "serve/test_serve_options.py::test_model_changes_data_dir_and_checkpoint_reach_the_server",
        ),
    ),
    "serve --device": (T, ("serve/test_serve_options.py::test_loading_options_reach_the_server",)),
    "serve --lenient": (T, ("serve/test_serve_options.py::test_loading_options_reach_the_server",)),
    "serve --allow-nonfinite": (
        T,
        ("serve/test_serve_options.py::test_loading_options_reach_the_server",),
    ),
    "serve --stable-softmax": (
        T,
        ("serve/test_serve_options.py::test_loading_options_reach_the_server",),
    ),
    "serve --host": (
        N,
        "the address the server listens on (127.0.0.1 by default; the original listened on every address): which clients reach it, not what it answers",
    ),
    "serve --port": (T, ("serve/test_serve_api.py::test_serve_port_in_use_is_one_line",)),
    "serve --beam-size": (T, ("serve/test_serve_options.py::test_beam_size_is_the_default_beam",)),
    "serve --pretokenized": (
        T,
        ("serve/test_serve_options.py::test_pretokenized_splits_on_whitespace",),
    ),
    "serve --source-lang": (
        T,
        ("serve/test_serve_options.py::test_source_and_target_languages_choose_moses_rules",),
    ),
    "serve --target-lang": (
        T,
        ("serve/test_serve_options.py::test_source_and_target_languages_choose_moses_rules",),
    ),
    "serve --max-beam": (
        T,
        ("serve/test_serve_options.py::test_limits_below_their_defaults_refuse[max-beam]",),
    ),
    "serve --max-sentences": (
        T,
        ("serve/test_serve_options.py::test_limits_below_their_defaults_refuse[max-sentences]",),
    ),
    "serve --max-tokens": (
        T,
        ("serve/test_serve_options.py::test_limits_below_their_defaults_refuse[max-tokens]",),
    ),
    "serve --max-chars": (
        T,
        ("serve/test_serve_options.py::test_limits_below_their_defaults_refuse[max-chars]",),
    ),
    "serve --max-body": (
        T,
        ("serve/test_serve_options.py::test_limits_below_their_defaults_refuse[max-body]",),
    ),
    "serve --max-pending": (
        T,
        ("serve/test_serve_options.py::test_pending_timeout_and_client_timeout",),
    ),
    "serve --max-steps": (
        T,
        ("serve/test_serve_options.py::test_limits_below_their_defaults_refuse[max-steps]",),
    ),
    "serve --timeout": (
        T,
        ("serve/test_serve_options.py::test_pending_timeout_and_client_timeout",),
    ),
    "serve --client-timeout": (
        T,
        ("serve/test_serve_options.py::test_pending_timeout_and_client_timeout",),
    ),
    "serve --drain": (
        T,
        ("serve/test_serve_options.py::test_drain_is_the_grace_the_shutdown_announces",),
    ),
    "serve --allow-origin": (T, ("serve/test_serve_options.py::test_hosts_and_origins_allowed",)),
    "serve --allow-host": (T, ("serve/test_serve_options.py::test_hosts_and_origins_allowed",)),
    "serve --batch-wait-ms": (
        N,
        "how concurrent requests are grouped for decoding, not what each is answered: every request is answered as alone (serve/test_serve_api.py::test_concurrent_requests_share_one_batch), and the batched search gives the same words at any batch size (parity/test_frozen_outputs.py, batch 1 and 32)",
    ),
    "serve --batch-size": (
        N,
        "how concurrent requests are grouped for decoding, not what each is answered: every request is answered as alone (serve/test_serve_api.py::test_concurrent_requests_share_one_batch), and the batched search gives the same words at any batch size (parity/test_frozen_outputs.py, batch 1 and 32)",
    ),
    "serve --batch-rows": (
        N,
        "how concurrent requests are grouped for decoding, not what each is answered: every request is answered as alone (serve/test_serve_api.py::test_concurrent_requests_share_one_batch), and the batched search gives the same words at any batch size (parity/test_frozen_outputs.py, batch 1 and 32)",
    ),
    # -- preprocess
    "preprocess INPUT": (
        T,
        (
            "cli/test_preprocess_options.py::test_the_command_line_writes_what_the_option_does[lowercase]",
        ),
    ),
    "preprocess --binarized-text": (
        T,
        (
            "cli/test_preprocess_options.py::test_the_command_line_writes_what_the_option_does[binarized_text]",
        ),
    ),
    "preprocess --dictionary": (
        T,
        (
            "cli/test_preprocess_options.py::test_the_command_line_writes_what_the_option_does[dictionary]",
        ),
    ),
    "preprocess --ngram": (
        T,
        (
            "cli/test_preprocess_options.py::test_the_command_line_writes_what_the_option_does[ngram]",
        ),
    ),
    "preprocess --vocab": (
        T,
        (
            "cli/test_preprocess_options.py::test_the_command_line_writes_what_the_option_does[vocab]",
        ),
    ),
    "preprocess --pickle": (
        T,
        (
            "cli/test_preprocess_options.py::test_the_command_line_writes_what_the_option_does[lowercase]",
        ),
    ),
    "preprocess --split": (
        T,
        (
            "cli/test_preprocess_options.py::test_the_command_line_writes_what_the_option_does[split]",
        ),
    ),
    "preprocess --overwrite": (T, ("hardening/test_evidence.py::test_preprocess_onto_its_input",)),
    "preprocess --each": (
        T,
        (
            "cli/test_preprocess_options.py::test_the_command_line_writes_what_the_option_does[each]",
        ),
    ),
    "preprocess --count": (
        T,
        (
            "cli/test_preprocess_options.py::test_the_command_line_writes_what_the_option_does[count]",
        ),
    ),
    "preprocess --char": (
        T,
        (
            "cli/test_preprocess_options.py::test_the_command_line_writes_what_the_option_does[char]",
        ),
    ),
    "preprocess --lowercase": (
        T,
        (
            "cli/test_preprocess_options.py::test_the_command_line_writes_what_the_option_does[lowercase]",
        ),
    ),
    "preprocess --dict-order": (
        T,
        (
            "cli/test_preprocess_options.py::test_the_command_line_writes_what_the_option_does[dict_order]",
        ),
    ),
    "preprocess --seed": (
        T,
        (
            "cli/test_preprocess_options.py::test_the_command_line_writes_what_the_option_does[seed]",
        ),
    ),
    "preprocess --ivocab": (
        T,
        (
            "cli/test_preprocess_options.py::test_the_command_line_writes_what_the_option_does[ivocab]",
        ),
    ),
    "preprocess --h5": (
        T,
        ("cli/test_preprocess_options.py::test_the_command_line_writes_what_the_option_does[h5]",),
    ),
    # -- invert-dict
    "invert-dict INPUT": (
        T,
        (
            "hardening/test_evidence.py::test_invert_dict_onto_its_input",
            "unit/test_preprocess.py::test_invert_dict_command",
        ),
    ),
    "invert-dict OUTPUT": (
        T,
        (
            "hardening/test_evidence.py::test_invert_dict_onto_its_input",
            "unit/test_preprocess.py::test_invert_dict_command",
        ),
    ),
    "invert-dict --dict-order": (T, ("unit/test_preprocess.py::test_invert_dict_command",)),
    # -- pkl2hdf5
    "pkl2hdf5 INPUT": (
        T,
        (
            "hardening/test_evidence.py::test_pkl2hdf5_onto_its_input",
            "hardening/test_evidence.py::test_shuffle_hdf5_onto_its_inputs",
            "unit/test_preprocess.py::test_pkl2hdf5_command",
        ),
    ),
    "pkl2hdf5 OUTPUT": (
        T,
        (
            "hardening/test_evidence.py::test_pkl2hdf5_onto_its_input",
            "hardening/test_evidence.py::test_shuffle_hdf5_onto_its_inputs",
            "unit/test_preprocess.py::test_pkl2hdf5_command",
        ),
    ),
    # -- shuffle-hdf5
    "shuffle-hdf5 SOURCE_INPUT": (
        T,
        (
            "hardening/test_evidence.py::test_shuffle_hdf5_onto_its_inputs",
            "unit/test_preprocess.py::test_shuffle_is_a_pair_preserving_permutation",
            "unit/test_preprocess.py::test_shuffle_refuses_sides_of_different_lengths",
        ),
    ),
    "shuffle-hdf5 TARGET_INPUT": (
        T,
        (
            "unit/test_preprocess.py::test_shuffle_is_a_pair_preserving_permutation",
            "unit/test_preprocess.py::test_shuffle_refuses_sides_of_different_lengths",
        ),
    ),
    "shuffle-hdf5 SOURCE_OUTPUT": (
        T,
        (
            "hardening/test_evidence.py::test_shuffle_hdf5_onto_its_inputs",
            "unit/test_preprocess.py::test_shuffle_is_a_pair_preserving_permutation",
        ),
    ),
    "shuffle-hdf5 TARGET_OUTPUT": (
        T,
        (
            "hardening/test_evidence.py::test_shuffle_hdf5_onto_its_inputs",
            "unit/test_preprocess.py::test_shuffle_is_a_pair_preserving_permutation",
        ),
    ),
    "shuffle-hdf5 --seed": (
        T,
        ("unit/test_preprocess.py::test_shuffle_is_a_pair_preserving_permutation",),
    ),
    # -- convert
    "convert INPUT": (
        T,
        (
            "hardening/test_evidence.py::test_convert_onto_its_input_needs_in_place",
            "unit/test_compat.py::test_convert_writes_the_converted_files",
            "unit/test_compat.py::test_convert_in_place",
        ),
    ),
    "convert OUTPUT": (T, ("unit/test_compat.py::test_convert_writes_the_converted_files",)),
    "convert --in-place": (T, ("unit/test_compat.py::test_convert_in_place",)),
    # -- export
    "export --format": (
        T,
        ("cli/test_cli_interface.py::test_missing_matplotlib_is_said_before_anything_is_loaded",),
    ),
    "export --state": (
        T,
        ("cli/test_model_options.py::test_export_carries_the_model_and_changes[words]",),
    ),
    "export MODEL": (
        T,
        ("cli/test_model_options.py::test_export_carries_the_model_and_changes[words]",),
    ),
    "export CHANGES": (
        T,
        ("cli/test_model_options.py::test_export_carries_the_model_and_changes[words]",),
    ),
    "export --model": (
        T,
        ("cli/test_model_options.py::test_export_carries_the_model_and_changes[--model]",),
    ),
    "export --changes": (
        T,
        ("cli/test_model_options.py::test_export_carries_the_model_and_changes[--changes]",),
    ),
    "export --strict": (
        T,
        ("cli/test_model_options.py::test_strict_refuses_a_typo_in_every_command[export]",),
    ),
    "export --checkpoint": (
        T,
        ("cli/test_model_options.py::test_export_from_a_checkpoint_and_with_data_dir",),
    ),
    "export --data-dir": (
        T,
        ("cli/test_model_options.py::test_export_from_a_checkpoint_and_with_data_dir",),
    ),
    "export --device": (
        T,
        ("cli/test_model_options.py::test_device_is_used_by_every_command[export]",),
    ),
    "export --lenient": (
        T,
        ("cli/test_model_options.py::test_export_refuses_what_would_change_the_model[--lenient]",),
    ),
    "export --allow-nonfinite": (
        T,
        ("cli/test_model_options.py::test_export_allow_nonfinite_carries_the_nan",),
    ),
    "export --stable-softmax": (
        T,
        (
            "cli/test_model_options.py::test_export_refuses_what_would_change_the_model[--stable-softmax]",
        ),
    ),
    "export OUTDIR": (
        N,
        "argparse never fills it: the last word goes to CHANGES (nargs='*' before it), from which commands/common.py's model_and_changes takes it back as the folder; the word itself is tested through CHANGES: cli/test_model_options.py::test_export_carries_the_model_and_changes[OUTDIR]",
    ),
    "export --out": (
        T,
        ("cli/test_model_options.py::test_export_carries_the_model_and_changes[words]",),
    ),
    # -- archive
    "archive ROOT": (
        T,
        (
            "cli/test_archive.py::test_the_bleu_tokenizer_given_is_the_one_used",
            "cli/test_cli_frictions.py::test_archive_dpi_sets_the_plots_resolution",
            "cli/test_lab_archive.py::test_plan_only_then_plan_gives_the_same_report",
        ),
    ),
    "archive --out": (
        T,
        (
            "cli/test_archive.py::test_the_bleu_tokenizer_given_is_the_one_used",
            "cli/test_cli_frictions.py::test_archive_dpi_sets_the_plots_resolution",
            "cli/test_lab_archive.py::test_plan_only_then_plan_gives_the_same_report",
            "cli/test_lab_habits.py::test_plan_only_then_plan_gives_the_same_report",
        ),
    ),
    "archive --data-dir": (
        T,
        (
            "cli/test_testsets.py::test_one_warning_per_cause_and_each_hint_works",
            "cli/test_testsets.py::test_links_outside_the_archive_are_one_warning_whose_fix_works",
        ),
    ),
    "archive --source": (
        T,
        ("cli/test_testsets.py::test_one_warning_per_cause_and_each_hint_works",),
    ),
    "archive --ref": (T, ("cli/test_archive_options.py::test_source_and_ref_name_the_test_set",)),
    "archive --test-sets": (
        T,
        (
            "cli/test_testsets.py::test_one_warning_per_cause_and_each_hint_works",
            "cli/test_testsets.py::test_holdout_hints_name_what_serves_a_holdout_set",
        ),
    ),
    "archive --changes": (T, ("cli/test_archive_options.py::test_changes_reach_every_experiment",)),
    "archive --snapshot": (T, ("cli/test_archive_options.py::test_snapshot_chooses_the_model",)),
    "archive --plan-only": (
        T,
        (
            "cli/test_lab_archive.py::test_plan_only_then_plan_gives_the_same_report",
            "cli/test_lab_archive.py::test_plan_round_trips_where_an_output_matches_no_setting",
            "cli/test_lab_habits.py::test_plan_only_then_plan_gives_the_same_report",
        ),
    ),
    "archive --plan": (
        T,
        (
            "cli/test_lab_archive.py::test_plan_only_then_plan_gives_the_same_report",
            "cli/test_lab_archive.py::test_plan_rejects_an_unknown_key_with_the_closest",
            "cli/test_lab_habits.py::test_plan_only_then_plan_gives_the_same_report",
        ),
    ),
    "archive --max-sentences": (
        T,
        ("cli/test_archive.py::test_the_bleu_tokenizer_given_is_the_one_used",),
    ),
    "archive --plots": (
        T,
        ("cli/test_cli_frictions.py::test_archive_dpi_sets_the_plots_resolution",),
    ),
    "archive --dpi": (
        T,
        ("cli/test_cli_frictions.py::test_archive_dpi_sets_the_plots_resolution",),
    ),
    "archive --parity-groups": (
        T,
        ("cli/test_archive_options.py::test_parity_groups_choose_the_recorded_groups",),
    ),
    "archive --batch-size": (
        N,
        "how many sentences the batched search decodes together: the same words at any batch size (parity/test_frozen_outputs.py, batch 1 and 32; the batched search against the literal one, test_legacy_cases.py)",
    ),
    "archive --tokenize": (
        T,
        ("cli/test_archive.py::test_the_bleu_tokenizer_given_is_the_one_used",),
    ),
    "archive --device": (T, ("cli/test_archive_options.py::test_device_is_used",)),
    "archive --max-memory-mib": (
        T,
        ("hardening/test_containment.py::test_a_runaway_experiment_leaves_the_others_done",),
    ),
    "archive --max-cpu-minutes": (
        T,
        ("hardening/test_containment.py::test_a_runaway_experiment_leaves_the_others_done",),
    ),
    "archive --fresh": (
        T,
        ("cli/test_archive_options.py::test_fresh_redoes_what_the_cache_holds",),
    ),
    "archive --progress": (
        N,
        "the progress line or bar on stderr only (shown on a terminal anyway): no file, stdout or exit status changes",
    ),
    # -- beam_search.py
    "beam_search.py --model-dir": (
        T,
        (
            "export/test_export_onnx.py::test_driver_command_line_writes_the_recorded_lines[normalize]",
        ),
    ),
    "beam_search.py --beam-size": (
        T,
        (
            "export/test_export_onnx.py::test_driver_command_line_writes_the_recorded_lines[normalize]",
        ),
    ),
    "beam_search.py --source": (
        T,
        (
            "export/test_export_onnx.py::test_driver_command_line_writes_the_recorded_lines[normalize]",
        ),
    ),
    "beam_search.py --trans": (
        T,
        (
            "export/test_export_onnx.py::test_driver_command_line_writes_the_recorded_lines[normalize]",
        ),
    ),
    "beam_search.py --ignore-unk": (
        T,
        (
            "export/test_export_onnx.py::test_driver_command_line_writes_the_recorded_lines[ignore_unk]",
        ),
    ),
    "beam_search.py --normalize": (
        T,
        (
            "export/test_export_onnx.py::test_driver_command_line_writes_the_recorded_lines[normalize]",
        ),
    ),
    "beam_search.py --threads": (
        N,
        "onnxruntime's intra-op threads: how fast, not what is computed",
    ),
}
