//! The embedders' integration tests on the real model files, one module per subject, in one
//! test binary. One module's tests: `cargo test -p shale-embed --test embed <module>::`.

mod model_missing_or_damaged;
mod onnx_files_missing_or_damaged;
mod onnx_quality_guard;
mod paraphrased_questions_real_model;
mod real_model;
