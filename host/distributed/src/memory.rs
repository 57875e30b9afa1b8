//! Memory helpers for sharded training that c10d alone does not give.

/// Drops `param`'s accumulated gradient, as `param.grad = None` does in
/// PyTorch: after a reduce-scatter a sharded optimizer keeps only its shard
/// of the gradient, and the full-size buffer can go. The next backward
/// allocates it again.
pub fn release_grad(param: &tch::Tensor) {
    crate::ffi::release_grad(param);
}

#[cfg(test)]
mod tests {
    use tch::{Kind, Tensor};

    #[test]
    fn release_grad_drops_the_gradient_and_backward_recreates_it() {
        let p = Tensor::ones([3], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
        (&p * 2.0).sum(Kind::Float).backward();
        assert!(p.grad().defined());
        super::release_grad(&p);
        assert!(!p.grad().defined());
        (&p * 3.0).sum(Kind::Float).backward();
        assert_eq!(Vec::<f32>::try_from(p.grad()).unwrap(), vec![3.0; 3]);
    }
}
