import Digits from './digits';

export default function Page() {
  return <Digits />;
}
