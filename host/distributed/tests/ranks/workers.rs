//! What each rank does in a scenario. A worker that checks an expected
//! failure prints it and exits with code 3; any other failure panics (101).
use std::time::{Duration, Instant};

use skyrl_distributed::{Backend, DistError, LaunchEnv, ProcessGroup, ReduceOp};
use tch::{Device, Kind, Tensor};

pub fn run(scenario: &str) {
    tch::set_num_threads(1);
    let env = LaunchEnv::from_env()
        .expect("launch env")
        .expect("launcher variables");
    match scenario {
        "collectives" => collectives(&env),
        "killed" => killed(&env),
        "lonely" => lonely(&env),
        other => panic!("unknown scenario {other}"),
    }
}

fn f32s(t: &Tensor) -> Vec<f32> {
    Vec::<f32>::try_from(&t.to_kind(Kind::Float).reshape([-1])).unwrap()
}

fn i64s(t: &Tensor) -> Vec<i64> {
    Vec::<i64>::try_from(&t.reshape([-1])).unwrap()
}

fn collectives(env: &LaunchEnv) {
    let pg = ProcessGroup::init(env, Backend::Gloo, Duration::from_secs(30)).expect("init");
    let r = pg.rank();
    let k = (r + 1) as f32; // 1 on rank 0, 2 on rank 1
    println!(
        "joined rank={r} world={} agent_store={}",
        pg.world_size(),
        env.use_agent_store
    );
    assert_eq!((pg.world_size(), pg.backend()), (2, Backend::Gloo));

    // all_reduce f32: sum, max, avg; min on a non-contiguous tensor.
    for (op, want) in [
        (ReduceOp::Sum, [3.0, 6.0]),
        (ReduceOp::Max, [2.0, 4.0]),
        (ReduceOp::Avg, [1.5, 3.0]),
    ] {
        let mut t = Tensor::from_slice(&[k, 2.0 * k]);
        pg.all_reduce(&mut t, op).unwrap();
        assert_eq!(f32s(&t), want, "{op:?}");
    }
    let mut t = (Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0]).reshape([2, 2]) * k as f64).tr();
    assert!(!t.is_contiguous());
    pg.all_reduce(&mut t, ReduceOp::Min).unwrap();
    assert_eq!(f32s(&t), [1.0, 3.0, 2.0, 4.0]);

    // bf16 and i64.
    let mut t = Tensor::from_slice(&[k, 0.5 * k]).to_kind(Kind::BFloat16);
    pg.all_reduce(&mut t, ReduceOp::Sum).unwrap();
    assert_eq!((t.kind(), f32s(&t)), (Kind::BFloat16, vec![3.0, 1.5]));
    for (op, want) in [
        (ReduceOp::Sum, [3, 30]),
        (ReduceOp::Max, [2, 20]),
        (ReduceOp::Min, [1, 10]),
    ] {
        let mut t = Tensor::from_slice(&[r as i64 + 1, 10 * (r as i64 + 1)]);
        pg.all_reduce(&mut t, op).unwrap();
        assert_eq!(i64s(&t), want, "{op:?}");
    }
    let e = pg
        .all_reduce(&mut Tensor::from_slice(&[1i64]), ReduceOp::Avg)
        .unwrap_err();
    assert!(matches!(e, DistError::InvalidTensor { .. }), "{e}");

    // all_reduce_many: mixed dtypes, one buffer per dtype.
    let mut ts = vec![
        Tensor::ones([2, 2], (Kind::Float, Device::Cpu)) * k as f64,
        Tensor::from_slice(&[r as i64, 5]),
        Tensor::from_slice(&[k]),
        Tensor::from_slice(&[k, k]).to_kind(Kind::BFloat16),
    ];
    pg.all_reduce_many(&mut ts, ReduceOp::Sum).unwrap();
    assert_eq!(f32s(&ts[0]), [3.0; 4]);
    assert_eq!(ts[0].size(), [2, 2]);
    assert_eq!(i64s(&ts[1]), [1, 10]);
    assert_eq!(f32s(&ts[2]), [3.0]);
    assert_eq!(
        (ts[3].kind(), f32s(&ts[3])),
        (Kind::BFloat16, vec![3.0, 3.0])
    );

    // reduce_scatter: flat input of 2 * 2, rank r gets chunk r.
    let input = Tensor::from_slice(&[0.0f32, 1.0, 2.0, 3.0]) + 10.0 * r as f64;
    let mut out = Tensor::zeros([2], (Kind::Float, Device::Cpu));
    pg.reduce_scatter(&mut out, &input, ReduceOp::Sum).unwrap();
    let want = if r == 0 { [10.0, 12.0] } else { [14.0, 16.0] };
    assert_eq!(f32s(&out), want);
    let input = Tensor::from_slice(&[0i64, 1, 2, 3]) + 10 * r as i64;
    let mut out = Tensor::zeros([2], (Kind::Int64, Device::Cpu));
    pg.reduce_scatter(&mut out, &input, ReduceOp::Max).unwrap();
    assert_eq!(i64s(&out), [10 + 2 * r as i64, 11 + 2 * r as i64]);
    let e = pg.reduce_scatter(
        &mut Tensor::zeros([3], (Kind::Float, Device::Cpu)),
        &input,
        ReduceOp::Sum,
    );
    assert!(matches!(e, Err(DistError::InvalidTensor { .. })), "{e:?}");

    // all_gather: chunk r from rank r; output of any shape.
    let mut out = Tensor::zeros([4], (Kind::Float, Device::Cpu));
    pg.all_gather(&mut out, &Tensor::from_slice(&[r as f32, r as f32 + 0.5]))
        .unwrap();
    assert_eq!(f32s(&out), [0.0, 0.5, 1.0, 1.5]);
    let mut out = Tensor::zeros([2, 2], (Kind::BFloat16, Device::Cpu));
    pg.all_gather(
        &mut out,
        &Tensor::from_slice(&[k, -k]).to_kind(Kind::BFloat16),
    )
    .unwrap();
    assert_eq!(f32s(&out), [1.0, -1.0, 2.0, -2.0]);
    let mut out = Tensor::zeros([2], (Kind::Int64, Device::Cpu));
    pg.all_gather(&mut out, &Tensor::from_slice(&[100 + r as i64]))
        .unwrap();
    assert_eq!(i64s(&out), [100, 101]);

    // broadcast from rank 1 (f32) and rank 0 (i64).
    let mut t = Tensor::from_slice(&[k, k]);
    pg.broadcast(&mut t, 1).unwrap();
    assert_eq!(f32s(&t), [2.0, 2.0]);
    let mut t = Tensor::from_slice(&[r as i64 + 7]);
    pg.broadcast(&mut t, 0).unwrap();
    assert_eq!(i64s(&t), [7]);
    assert!(matches!(
        pg.broadcast(&mut t, 2),
        Err(DistError::InvalidTensor { .. })
    ));
    pg.barrier().unwrap();

    // Bytes of different lengths, and empty ones.
    let mine: &[u8] = if r == 0 {
        b"hello"
    } else {
        b"rank one says hi"
    };
    let all = pg.all_gather_bytes(mine).unwrap();
    assert_eq!(all, vec![b"hello".to_vec(), b"rank one says hi".to_vec()]);
    assert_eq!(
        pg.all_gather_bytes(b"").unwrap(),
        vec![Vec::<u8>::new(), Vec::new()]
    );
    let json = br#"{"loss":0.25,"step":3}"#.to_vec();
    let got = pg
        .broadcast_bytes((r == 0).then(|| json.clone()), 0)
        .unwrap();
    assert_eq!(got, json);
    assert_eq!(
        pg.broadcast_bytes(Some(Vec::new()), 1).unwrap(),
        Vec::<u8>::new()
    );

    // Store.
    if r == 0 {
        pg.store_set("greeting", b"hi from 0").unwrap();
    }
    assert_eq!(pg.store_get("greeting").unwrap(), b"hi from 0");
    pg.store_add("counter", r as i64 + 1).unwrap();
    pg.barrier().unwrap();
    assert_eq!(pg.store_add("counter", 0).unwrap(), 3);
    assert!(pg.store_check(&["greeting", "counter"]).unwrap());
    assert!(!pg.store_check(&["never-set"]).unwrap());
    pg.barrier().unwrap();
    println!("collectives ok on rank {r}");
}

fn killed(env: &LaunchEnv) {
    let pg = ProcessGroup::init(env, Backend::Gloo, Duration::from_secs(90)).expect("init");
    pg.barrier().unwrap();
    println!("joined rank={}", pg.rank());
    let victim: usize = std::env::var("SKYRL_DIST_VICTIM").map_or(1, |v| v.parse().unwrap());
    if pg.rank() == victim {
        // Never joins the all_reduce: the parent SIGKILLs this rank.
        std::thread::sleep(Duration::from_secs(300));
        return;
    }
    let start = Instant::now();
    let mut t = Tensor::ones([1024], (Kind::Float, Device::Cpu));
    let e = pg
        .all_reduce(&mut t, ReduceOp::Sum)
        .expect_err("the peer was killed");
    println!(
        "all_reduce failed after {:.2}s: {e}",
        start.elapsed().as_secs_f64()
    );
    let dropping = Instant::now();
    drop(pg);
    println!(
        "dropped the group in {:.2}s",
        dropping.elapsed().as_secs_f64()
    );
    std::process::exit(3);
}

fn lonely(env: &LaunchEnv) {
    let start = Instant::now();
    let e = match ProcessGroup::init(env, Backend::Gloo, Duration::from_secs(3)) {
        Ok(_) => panic!("init should fail without a peer"),
        Err(e) => e,
    };
    println!(
        "lonely error after {:.2}s: {e}",
        start.elapsed().as_secs_f64()
    );
    std::process::exit(3);
}
